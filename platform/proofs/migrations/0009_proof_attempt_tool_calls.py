from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('proofs', '0008_proof_attempt_round'),
    ]

    operations = [
        migrations.AddField(
            model_name='proofattempt',
            name='tool_calls',
            field=models.JSONField(blank=True, default=list, help_text="The Lean checks the answer asked for inside its reasoning (rollout.lean_tool_calls), in order: snippet, Lean's reply, verdict, and when each was asked and answered."),
        ),
    ]
