from __future__ import annotations

from django import forms
from pydantic import ValidationError

from promptsets.curation import WinRateSource, parse_rule
from promptsets.hub_import import HubSource, HubSourceError
from promptsets.intake import FIELD_LABELS, RECIPE_HEADER, ColumnMapping, RowLimits
from promptsets.parsing import DEFAULT_MAX_ROW_BYTES, FileFormat
from promptsets.upload_contract import MAX_STATEMENT_CHARS_LEAST, MAX_STATEMENT_CHARS_MOST, import_options
from promptsets.validation import DEFAULT_MAX_STATEMENT_CHARS

MAPPING_FIELDS = tuple(FIELD_LABELS)


class UploadForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    is_public = forms.BooleanField(required=False, label="Public (every signed-in person may see it and train on it)")
    file = forms.FileField(help_text="JSON Lines (.jsonl), a JSON array (.json), Parquet (.parquet) or CSV (.csv), UTF-8.")
    file_format = forms.ChoiceField(
        choices=[("", "From the file name")] + [(f.value, f.value) for f in FileFormat], required=False,
    )
    skip_invalid_rows = forms.BooleanField(
        required=False, label="Skip invalid rows (otherwise one invalid row rejects the whole upload)",
    )
    default_header = forms.CharField(
        required=False, initial=RECIPE_HEADER, widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Given to rows whose statement has no imports of its own. Leave empty to give none.",
    )
    max_statement_chars = forms.IntegerField(
        min_value=MAX_STATEMENT_CHARS_LEAST, max_value=MAX_STATEMENT_CHARS_MOST, initial=DEFAULT_MAX_STATEMENT_CHARS,
        required=False, help_text=f"Longer statements (header included) are rejected. From "
                                  f"{MAX_STATEMENT_CHARS_LEAST:,} to {MAX_STATEMENT_CHARS_MOST:,}.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field_name, label in FIELD_LABELS.items():
            self.fields[f"{field_name}_column"] = forms.CharField(
                required=False, max_length=200, label=f"{label} column",
                help_text="Leave empty to use the usual column names.",
            )

    def clean_default_header(self):
        # A client that does not send the field at all (a script, a test) gets the recipe's
        # header; someone who empties the box in the form gets none.
        if self.add_prefix("default_header") not in self.data:
            return RECIPE_HEADER
        return self.cleaned_data["default_header"]

    def clean_max_statement_chars(self):
        return self.cleaned_data["max_statement_chars"] or DEFAULT_MAX_STATEMENT_CHARS

    def mapping_fields(self):
        return [self[f"{field_name}_column"] for field_name in MAPPING_FIELDS]

    def column_mapping(self) -> ColumnMapping:
        return ColumnMapping(**{
            field_name: self.cleaned_data.get(f"{field_name}_column", "").strip() or None for field_name in MAPPING_FIELDS
        })

    def limits(self) -> RowLimits:
        return RowLimits(max_row_bytes=DEFAULT_MAX_ROW_BYTES, max_statement_chars=self.cleaned_data["max_statement_chars"])

    def import_options(self) -> dict:
        """The choices the worker needs to import the file (JSON: stored with the upload)."""
        return import_options(
            # A Hub import has no format field: the action stages it as JSON Lines.
            file_format=self.cleaned_data.get("file_format") or None, mapping=self.column_mapping(),
            skip_invalid_rows=self.cleaned_data["skip_invalid_rows"], description=self.cleaned_data["description"],
            is_public=self.cleaned_data["is_public"], default_header=self.cleaned_data["default_header"],
            limits=self.limits())


class HubImportForm(UploadForm):
    """A dataset instead of a file (a Hub name, or a folder on the server), with the upload's other choices."""

    file = None
    file_format = None
    dataset = forms.CharField(required=False, max_length=200, label="Dataset on the Hub",
                              help_text="owner/name, e.g. AI-MO/Kimina-Prover-Promptset. The server must reach the Hub.")
    folder = forms.CharField(required=False, max_length=1000, label="Or a dataset folder on the server",
                             help_text="Its absolute path, under a folder the operator allowed (PROMPTSET_IMPORT_ROOTS): "
                                       "the Hub's layout (data/*.parquet) or one written by save_to_disk.")
    config = forms.CharField(required=False, max_length=100, help_text="Leave empty for the dataset's default.")
    split = forms.CharField(max_length=100, initial="train")
    revision = forms.CharField(required=False, max_length=200, help_text="A branch, tag or commit; empty for main.")

    field_order = ["name", "dataset", "folder", "config", "split", "revision", "description", "is_public"]

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            cleaned["source"] = HubSource.from_fields(
                dataset=cleaned["dataset"], folder=cleaned["folder"], config=cleaned["config"], split=cleaned["split"],
                revision=cleaned["revision"])
        except HubSourceError as error:
            self.add_error(None, str(error))
        return cleaned


class CurationForm(forms.Form):
    kind = forms.ChoiceField(choices=[
        ("drop_above_win_rate", "Drop problems above a win rate"),
        ("weight_hard", "Repeat hard problems"),
        ("sample", "Random sample"),
        ("split", "Split into train and eval"),
    ])
    max_win_rate = forms.FloatField(required=False, min_value=0, max_value=1,
                                    help_text="Drop: above this. Repeat: at or below this. From 0 to 1.")
    win_rate_source = forms.ChoiceField(choices=[
        (WinRateSource.FILE.value, "The file's win rate"), (WinRateSource.PLATFORM.value, "This platform's runs"),
    ], initial=WinRateSource.FILE.value, required=False)
    keep_unknown = forms.BooleanField(required=False, initial=True, label="Keep problems with no win rate")
    copies = forms.IntegerField(required=False, min_value=2, max_value=32, help_text="Repeat: copies of each hard problem.")
    count = forms.IntegerField(required=False, min_value=1, help_text="Sample: how many problems.")
    eval_fraction = forms.FloatField(required=False, min_value=0.001, max_value=0.999,
                                     help_text="Split: share held out for evaluation.")
    seed = forms.IntegerField(required=False, initial=0)

    FIELDS_BY_KIND = {
        "drop_above_win_rate": ("max_win_rate", "win_rate_source", "keep_unknown"),
        "weight_hard": ("max_win_rate", "copies", "win_rate_source"),
        "sample": ("count", "seed"),
        "split": ("eval_fraction", "seed"),
    }

    def clean(self):
        cleaned = super().clean()
        kind = cleaned.get("kind")
        if not kind:
            return cleaned
        data = {"kind": kind}
        for field_name in self.FIELDS_BY_KIND[kind]:
            if field_name in self.errors:
                continue  # filled but invalid ("20" for a share): its own error says why, never "required"
            value = cleaned.get(field_name)
            if value is None or value == "":
                if field_name in ("seed", "win_rate_source"):
                    continue  # the rule's defaults: seed 0, the file's win rate
                if field_name == "keep_unknown":
                    value = False
                else:
                    self.add_error(field_name, f"required for “{dict(self.fields['kind'].choices)[kind]}”")
                    continue
            data[field_name] = value
        if self.errors:
            return cleaned
        try:
            cleaned["rule"] = parse_rule(data)
        except ValidationError as error:
            for problem in error.errors():
                location = [part for part in problem["loc"] if part in self.fields]
                self.add_error(location[-1] if location else None, problem["msg"])
        return cleaned


class VariantsForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=8, initial=3, help_text="Variants to ask for, 1 to 8.")
