# The launch page describes each preset by its model's registry entry (runs/launch_plan.py), so the entries must say
# what the models are now: cpu-smoke's model is the smoke model (0009), no longer the tiny random one. An entry an
# administrator has reworded is left as it is.

from django.db import migrations

DESCRIPTIONS = {
    "tiny-random-llama": (
        "The cpu-smoke preset's tiny random model: plumbing checks only, it learns nothing useful.",
        "A tiny randomly initialised Llama for tests: every answer fails the format check, so none reaches Lean."),
    "tiny-smoke-llama": (
        "The cpu-smoke preset's tiny model: it knows answers to the smoke promptset by heart "
        "(trainer/smoke_model.py). A plumbing check that reaches Lean, not a prover.",
        "The cpu-smoke preset's tiny model: it knows by heart answers to the four problems of the smoke promptset "
        "(trainer/smoke_model.py) and reaches Lean only on that promptset; on any other its answers fail the format "
        "check. A plumbing check, not a prover."),
}


def reword(apps, schema_editor, *, forwards=True):
    RegisteredModel = apps.get_model("runs", "RegisteredModel")
    for name, (old, new) in DESCRIPTIONS.items():
        before, after = (old, new) if forwards else (new, old)
        RegisteredModel.objects.filter(name=name, description=before).update(description=after)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0009_the_smoke_model'),
    ]

    operations = [
        migrations.RunPython(reword, lambda apps, schema_editor: reword(apps, schema_editor, forwards=False)),
    ]
