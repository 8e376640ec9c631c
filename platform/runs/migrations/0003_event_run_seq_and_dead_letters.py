import django.db.models.deletion
from django.db import migrations, models

# Events stored before this migration are numbered by their database id, per run.
NUMBER_EXISTING_EVENTS = """
UPDATE runs_runevent AS event SET run_seq = numbered.position
FROM (SELECT id, row_number() OVER (PARTITION BY run_id ORDER BY id) AS position FROM runs_runevent) AS numbered
WHERE event.id = numbered.id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0002_checkpoint_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="runevent",
            name="run_seq",
            field=models.PositiveBigIntegerField(null=True),
        ),
        migrations.RunSQL(NUMBER_EXISTING_EVENTS, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="runevent",
            name="run_seq",
            field=models.PositiveBigIntegerField(
                help_text="Position among the run's stored events: 1, 2, 3… with no gap, given by the ingester as "
                          "it stores them, so a browser that sees 7 after 5 knows it missed 6 and fetches it.",
            ),
        ),
        migrations.AlterField(
            model_name="runevent",
            name="seq",
            field=models.BigIntegerField(
                help_text="The trainer's number: unique per publisher, not contiguous (ranks interleave).",
            ),
        ),
        migrations.AddConstraint(
            model_name="runevent",
            constraint=models.UniqueConstraint(fields=("run", "run_seq"), name="one_event_per_run_seq"),
        ),
        migrations.CreateModel(
            name="DeadLetter",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("stream_key", models.CharField(max_length=200)),
                ("entry_id", models.CharField(help_text="The Redis Stream entry id, e.g. 1717171717171-0.", max_length=64)),
                ("raw_payload", models.TextField(help_text="The entry's fields as JSON text (control characters escaped), cut at 1,000,000 characters.")),
                ("error", models.TextField(help_text="Why it could not be stored, in the ingester's words.")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("run", models.ForeignKey(blank=True, help_text="The run whose stream held the entry; empty if that run no longer exists.", null=True, on_delete=django.db.models.deletion.CASCADE, related_name="dead_letters", to="runs.run")),
            ],
            options={
                "ordering": ["-pk"],
                "constraints": [models.UniqueConstraint(fields=("stream_key", "entry_id"), name="one_dead_letter_per_entry")],
            },
        ),
    ]
