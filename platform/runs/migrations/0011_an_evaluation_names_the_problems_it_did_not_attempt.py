# An evaluation names each problem it left out with its reason (issue 45: an evaluation of 39 problems reported 38
# and said nothing of the 39th). Older evaluations left none out that they knew of: an empty list.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0010_registry_descriptions_say_what_the_models_are_now"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluation",
            name="not_attempted",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
