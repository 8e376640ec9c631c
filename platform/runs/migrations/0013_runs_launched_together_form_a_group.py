# Issue 49: one configuration on several seeds, or a small grid, launched together as a group a person compares.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("runs", "0012_a_run_retries_infrastructure_failures_and_keeps_each_attempts_placement"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunGroup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200)),
                ("launch", models.JSONField(help_text="The launch fields every member shares (the launch contract's), seed aside.")),
                ("grid", models.JSONField(blank=True, default=dict, help_text="Launch field → the values it takes across the cells; empty: one cell.")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("owner", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="run_groups", to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["-created_at"]},
        ),
        migrations.AddField(
            model_name="run",
            name="run_group",
            field=models.ForeignKey(blank=True, help_text="The seeds or grid it was launched with, if any.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="runs", to="runs.rungroup"),
        ),
    ]
