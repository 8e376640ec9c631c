# model.source "tiny_format": a tiny Llama taught the answer format by a short SFT (trainer/smoke_model.py),
# meant for the cpu-smoke preset; registered so that a launch can name it.

from django.db import migrations, models

SMOKE_MODEL = ("tiny-format-llama", "tiny_format", "tiny-format-llama",
               "A tiny model taught the answer format by a short SFT (trainer/smoke_model.py): plumbing checks only.")


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
            field=models.CharField(choices=[('huggingface', 'huggingface'), ('smollm2_gguf', 'smollm2_gguf'), ('tiny_random', 'tiny_random'), ('tiny_format', 'tiny_format')], help_text='huggingface: a hub name or a folder on the cluster; the others need no download.', max_length=32),
        ),
        migrations.RunPython(register_the_smoke_model, unregister_the_smoke_model),
    ]
