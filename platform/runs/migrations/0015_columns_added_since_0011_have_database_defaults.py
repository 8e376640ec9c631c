from django.db import migrations, models


class Migration(migrations.Migration):
    """A run inserted without the columns 0012 and 0014 added (by raw SQL, or by code from before them, such as
    a data migration's historical model) gets their defaults (3 infrastructure retries, the generated
    demonstrations) instead of failing on NOT NULL."""

    dependencies = [
        ('runs', '0014_an_sft_run_may_train_on_a_pipelines_proof_corpus'),
    ]

    operations = [
        migrations.AlterField(
            model_name='run',
            name='infrastructure_retries',
            field=models.PositiveSmallIntegerField(db_default=3, default=3, help_text="Attempts the platform starts by itself, each from the last checkpoint, after a failure of the infrastructure (a node lost, a worker preempted, an actor killed from outside); a failure of the run's own code is never retried. Set at launch."),
        ),
        migrations.AlterField(
            model_name='run',
            name='demonstrations_path',
            field=models.CharField(blank=True, db_default='', default='', help_text="SFT only: the demonstrations file it trains on (an expert-iteration pipeline's proof corpus); blank: demonstrations generated for its promptset, as the warm start does.", max_length=1000),
        ),
    ]
