from django.db import migrations, models
import django.utils.timezone


class Migration(migrations.Migration):

    dependencies = [
        ('promptsets', '0003_uploads_know_their_source'),
    ]

    operations = [
        migrations.AddField(
            model_name='promptsetupload',
            name='dry_run',
            field=models.BooleanField(default=False, help_text='Checked and reported only; nothing is imported.'),
        ),
        migrations.AddField(
            model_name='promptsetupload',
            name='updated_at',
            field=models.DateTimeField(auto_now=True, default=django.utils.timezone.now, help_text="The worker's last write: its progress, or the end."),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='promptsetupload',
            name='state',
            field=models.CharField(choices=[('pending', 'Waiting for a worker'), ('staging', 'Reading the dataset'), ('checking', 'Checking every row'), ('imported', 'Imported'), ('rejected', 'Rejected'), ('checked', 'Checked (a dry run: nothing imported)')], default='pending', max_length=16),
        ),
    ]
