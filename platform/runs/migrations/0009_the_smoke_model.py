# model.source "tiny_smoke": the cpu-smoke preset's model, tiny_random fine-tuned to know by heart answers to
# the smoke promptset (trainer/smoke_model.py); registered so that a launch can name it.

from django.db import migrations, models

SMOKE_MODEL = ("tiny-smoke-llama", "tiny_smoke", "tiny-smoke-llama",
               "The cpu-smoke preset's tiny model: it knows answers to the smoke promptset by heart "
               "(trainer/smoke_model.py). A plumbing check that reaches Lean, not a prover.")


def register_the_smoke_model(apps, schema_editor):
    RegisteredModel = apps.get_model("runs", "RegisteredModel")
    name, source, name_or_path, description = SMOKE_MODEL
    RegisteredModel.objects.get_or_create(name=name, defaults={
        "source": source, "name_or_path": name_or_path, "description": description})


def unregister_the_smoke_model(apps, schema_editor):
    apps.get_model("runs", "RegisteredModel").objects.filter(name=SMOKE_MODEL[0]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0008_evaluation_runs'),
    ]

    operations = [
        migrations.AlterField(
            model_name='registeredmodel',
            name='source',
            field=models.CharField(choices=[('huggingface', 'huggingface'), ('smollm2_gguf', 'smollm2_gguf'), ('tiny_random', 'tiny_random'), ('tiny_smoke', 'tiny_smoke')], help_text='huggingface: a hub name or a folder on the cluster; the others need no download.', max_length=32),
        ),
        migrations.RunPython(register_the_smoke_model, unregister_the_smoke_model),
    ]
