import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models, transaction


def record_every_runs_history(apps, schema_editor):
    """The history of the attempts stored before it existed, one run at a time, each in a transaction of its own
    holding that run's row (as the ingester does): the proof attempts table may hold millions of rows, so nothing
    locks it, nothing reads it whole, and an ingester running meanwhile neither waits long nor counts twice (a run
    whose history is there already is skipped; one interrupted is redone whole)."""
    from promptsets.models import statement_hash  # the one home of a statement's identity

    Run = apps.get_model("runs", "Run")
    Problem = apps.get_model("promptsets", "Problem")
    ProofAttempt = apps.get_model("proofs", "ProofAttempt")
    ProblemHistory = apps.get_model("proofs", "ProblemHistory")
    for run_id in Run.objects.order_by("pk").values_list("pk", flat=True).iterator():
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=run_id).first()
            if run is None or ProblemHistory.objects.filter(run_id=run_id).exists():
                continue
            groups = {}
            problem_hashes = {}
            attempts = (ProofAttempt.objects.filter(run_id=run_id)
                        .values_list("step", "round", "turn", "is_evaluation", "is_standin_verdict", "reward",
                                     "policy_version", "problem_id", "formal_statement")
                        .iterator(chunk_size=5000))
            for step, round_, turn, is_evaluation, is_standin, reward, policy, problem_id, formal_statement in attempts:
                if problem_id is not None and problem_id not in problem_hashes:
                    problem_hashes[problem_id] = Problem.objects.filter(pk=problem_id).values_list(
                        "statement_hash", flat=True).first()
                identity = problem_hashes.get(problem_id) or (
                    statement_hash(formal_statement) if formal_statement.strip() else None)
                if identity is None:
                    continue
                round_ = round_ if turn == "first" else max(1, round_)
                counts = groups.setdefault((identity, step, round_, is_evaluation, is_standin), [0, 0, 0, None])
                counts[0] += 1
                counts[1] += reward is not None
                counts[2] += reward is not None and reward >= 1
                if policy is not None:
                    counts[3] = max(counts[3] or 0, policy)
            ProblemHistory.objects.bulk_create(
                [ProblemHistory(statement_hash=identity, run_id=run_id, run_name=run.name, run_owner_id=run.owner_id,
                                starting_checkpoint_id=run.starting_checkpoint_id, step=step, round=round_,
                                is_evaluation=is_evaluation, is_standin=is_standin, answers=answers, scored=scored,
                                accepted=accepted, last_policy_version=policy)
                 for (identity, step, round_, is_evaluation, is_standin), (answers, scored, accepted, policy)
                 in groups.items()],
                batch_size=5000)


class Migration(migrations.Migration):
    # A new table, then its backfill run by run, each run in a transaction of its own (record_every_runs_history):
    # not one transaction over the whole proof attempts table.
    atomic = False

    dependencies = [
        ('promptsets', '0005_benchmarks'),
        ('proofs', '0009_proof_attempt_tool_calls'),
        ('runs', '0011_an_evaluation_names_the_problems_it_did_not_attempt'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ProblemHistory',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('statement_hash', models.CharField(max_length=64)),
                ('run_name', models.CharField(max_length=200)),
                ('starting_checkpoint_id', models.PositiveIntegerField(blank=True, help_text='The checkpoint the run\'s policy started from (runs.Checkpoint), if any.', null=True)),
                ('step', models.PositiveIntegerField()),
                ('round', models.PositiveSmallIntegerField(help_text='0: first attempts; 1, 2…: rounds of correction.')),
                ('is_evaluation', models.BooleanField(help_text='An evaluation\'s samples: they trained nothing.')),
                ('is_standin', models.BooleanField(help_text="Judged by the stand-in Lean server, not real Lean: never pooled with Lean's in a rate.")),
                ('answers', models.PositiveIntegerField(default=0, help_text='Answers generated, censored ones included.')),
                ('scored', models.PositiveIntegerField(default=0, help_text='Answers with a reward: censored ones left out.')),
                ('accepted', models.PositiveIntegerField(default=0, help_text='Scored answers Lean (or the stand-in) accepted.')),
                ('last_policy_version', models.PositiveIntegerField(blank=True, help_text='The newest policy version among the answers (learner updates).', null=True)),
                ('first_recorded_at', models.DateTimeField(auto_now_add=True)),
                ('last_recorded_at', models.DateTimeField(auto_now=True)),
                ('run', models.ForeignKey(db_constraint=False, help_text='Kept, with no constraint, after the run is deleted: the history outlives it.', on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='runs.run')),
                ('run_owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'problem histories',
                'indexes': [models.Index(fields=['run', 'step'], name='history_run_step')],
                'constraints': [models.UniqueConstraint(fields=('statement_hash', 'run', 'step', 'round', 'is_evaluation', 'is_standin'), name='one_history_row_per_group')],
            },
        ),
        migrations.RunPython(record_every_runs_history, migrations.RunPython.noop),
    ]
