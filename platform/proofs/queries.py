"""Which rollouts a viewer asked for: the filters of the proof viewer, shared by the page and the API."""

from __future__ import annotations

from django import forms
from django.contrib.postgres.search import SearchQuery
from django.db.models import QuerySet

from proofs.models import MAX_TRAJECTORY_ROUNDS, TEXT_SEARCH_CONFIG, ProofAttempt, Turn, Verdict
from trainer.observability import token_records
from trainer.observability.gap import RATIO_BOUNDS
from trainer.recipe.format_reward import FormatError

PAGE_SIZE = 100
MAX_PAGE_SIZE = 500


class RewardFilter:
    ACCEPTED = "1"
    ZERO = "0"
    CENSORED = "censored"
    CHOICES = [("", "any reward"), (ACCEPTED, "1 (accepted)"), (ZERO, "0 (rejected)"), (CENSORED, "censored")]


class PurposeFilter:
    """A training run stores its periodic evaluations' samples at the step they evaluated, beside that step's
    training rollouts: this filter tells them apart (ProofAttempt.is_evaluation)."""

    TRAINING = "training"
    EVALUATION = "evaluation"
    CHOICES = [("", "training and evaluation"), (TRAINING, "training rollouts"), (EVALUATION, "evaluation samples")]


class TruncatedFilter:
    TRUNCATED = "yes"
    COMPLETE = "no"
    CHOICES = [("", "any ending"), (TRUNCATED, "cut at the token limit"), (COMPLETE, "ended by the model")]


class MismatchFilter:
    """Answers with a token whose engine/learner ratio lies outside RATIO_BOUNDS (the mismatch chart's figure), read
    from the step's token records: only with a step, and only once the learner has scored the step."""

    OUTSIDE = "outside"
    CHOICES = [("", "any mismatch"), (OUTSIDE, f"a token's ratio outside [{RATIO_BOUNDS[0]}, {RATIO_BOUNDS[1]:g}]")]


ANY_FORMAT_ERROR = "any"
# The filters that compare a number: the form's field → the ORM lookup.
NUMBER_FILTERS = {"step": "step", "step_from": "step__gte", "step_to": "step__lte", "round": "round",
                  "policy_version": "policy_version", "min_tokens": "num_tokens__gte", "max_tokens": "num_tokens__lte"}


class RolloutFilters(forms.Form):
    """The proof viewer's filters, read from the page's URL, so that a link shows exactly this list. Blank
    fields filter nothing; bad values are form errors, never a 500."""

    step = forms.IntegerField(required=False, min_value=0)
    step_from = forms.IntegerField(required=False, min_value=0, label="From step")
    step_to = forms.IntegerField(required=False, min_value=0, label="To step")
    purpose = forms.ChoiceField(required=False, choices=PurposeFilter.CHOICES)
    turn = forms.ChoiceField(required=False, choices=[("", "any turn"), *Turn.choices])
    verdict = forms.ChoiceField(required=False, choices=[("", "any verdict"), ("none", "not sent to Lean"), *Verdict.choices])
    format_error = forms.ChoiceField(required=False, label="Format error",
                                     choices=[("", "any format"), (ANY_FORMAT_ERROR, "any format error"),
                                              *[(e.value, e.value.replace("_", " ")) for e in FormatError]])
    problem = forms.CharField(required=False, max_length=300, help_text="The problem's key, exactly.")
    reward = forms.ChoiceField(required=False, choices=RewardFilter.CHOICES)
    round = forms.IntegerField(required=False, min_value=0, label="Round",
                               help_text="Of correction: 0 a first attempt, 1 its retry, 2 the retry of that (retry.max_rounds).")
    policy_version = forms.IntegerField(required=False, min_value=0, label="Policy version",
                                        help_text="Learner updates in the weights that wrote it (0: the first weights).")
    min_tokens = forms.IntegerField(required=False, min_value=0, label="At least tokens")
    max_tokens = forms.IntegerField(required=False, min_value=0, label="At most tokens")
    truncated = forms.ChoiceField(required=False, choices=TruncatedFilter.CHOICES, label="Ending")
    text = forms.CharField(required=False, max_length=200, label="Text",
                           help_text="Words in the answer or in Lean's messages (all of them; \"a phrase\", -word).")
    mismatch = forms.ChoiceField(required=False, choices=MismatchFilter.CHOICES, label="Mismatch",
                                 help_text="Engine against learner, per token, from the step's token records.")
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput,
                                help_text="Only rollouts older than this id (the next page).")
    limit = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_SIZE, widget=forms.HiddenInput)

    def __init__(self, *args, run=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.run = run  # whose token records the mismatch filter reads

    def clean(self):
        data = super().clean()
        if data.get("mismatch") and data.get("step") is None:
            self.add_error("mismatch", "Choose a step too: the mismatch is read from one step's token records.")
        for low, high in (("step_from", "step_to"), ("min_tokens", "max_tokens")):
            if data.get(low) is not None and data.get(high) is not None and data[low] > data[high]:
                self.add_error(high, f"Must not be below {self.fields[low].label.lower()} ({data[low]}).")
        return data

    def active_filters(self) -> dict:
        """The filters that narrow the list, as the JavaScript filter receives them."""
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        return {name: value for name, value in data.items() if name not in ("before", "limit") and value not in (None, "")}


def filter_attempts(queryset: QuerySet[ProofAttempt], filters: RolloutFilters) -> QuerySet[ProofAttempt]:
    """Newest first. Each equality filter is answered by a (run, field, id) index without a scan (purpose with
    step: the (run, is_evaluation, step, id) index); the text search by the full-text index on the stored
    words (``attempt_text_search``)."""
    if not filters.is_valid():
        raise ValueError(f"invalid rollout filters: {filters.errors.as_json()}")
    data = filters.cleaned_data
    numbers = {lookup: data[name] for name, lookup in NUMBER_FILTERS.items() if data.get(name) is not None}
    if numbers:
        queryset = queryset.filter(**numbers)
    if data.get("purpose"):
        queryset = queryset.filter(is_evaluation=data["purpose"] == PurposeFilter.EVALUATION)
    if data.get("turn"):
        queryset = queryset.filter(turn=data["turn"])
    if data.get("verdict"):
        queryset = queryset.filter(verdict="" if data["verdict"] == "none" else data["verdict"])
    if data.get("format_error") == ANY_FORMAT_ERROR:
        queryset = queryset.exclude(format_error="")
    elif data.get("format_error"):
        queryset = queryset.filter(format_error=data["format_error"])
    if data.get("problem"):
        queryset = queryset.filter(problem_key=data["problem"])
    reward = data.get("reward")
    if reward == RewardFilter.CENSORED:
        queryset = queryset.filter(reward__isnull=True)
    elif reward == RewardFilter.ACCEPTED:
        queryset = queryset.filter(reward__gt=0)
    elif reward == RewardFilter.ZERO:
        queryset = queryset.filter(reward=0)
    if data.get("truncated"):
        queryset = queryset.filter(is_truncated=data["truncated"] == TruncatedFilter.TRUNCATED)
    if data.get("text", "").strip():
        queryset = queryset.filter(
            searchable=SearchQuery(data["text"], config=TEXT_SEARCH_CONFIG, search_type="websearch"))
    if data.get("mismatch") == MismatchFilter.OUTSIDE:
        if filters.run is None:
            raise ValueError("the mismatch filter reads a run's token records: build RolloutFilters(..., run=run)")
        recorded = token_records.step_records(filters.run.artifacts_dir, data["step"], ["ratio_outside_tokens"])
        queryset = queryset.filter(rollout_key__in=[key for key, row in recorded.items() if row["ratio_outside_tokens"]])
    if data.get("before"):
        queryset = queryset.filter(pk__lt=data["before"])
    return queryset.order_by("-pk")


def attempt_page(queryset: QuerySet[ProofAttempt], filters: RolloutFilters) -> tuple[list[ProofAttempt], int | None]:
    """One page of rollouts, newest first, and the id to pass as ``before`` for the next page (None at the end)."""
    limit = filters.cleaned_data.get("limit") or PAGE_SIZE
    rows = list(filter_attempts(queryset, filters).defer("prompt", "checked_code", "response", "searchable")[: limit + 1])
    next_before = rows[limit - 1].pk if len(rows) > limit else None
    rows = rows[:limit]
    attach_earlier_rounds(rows)
    return rows, next_before


_ROUND_FIELDS = ("pk", "parent_id", "rollout_key", "round", "verdict", "format_error", "reward", "is_censored")


def round_summary(row: dict) -> dict:
    """One round of a trajectory as the run page's cards draw it (frontend/src/_rollout_card.js ``roundTrajectory``):
    which answer, its round, and its verdict in words (a format error's category, where Lean never saw it)."""
    label = row["format_error"] or (Verdict(row["verdict"]).label if row["verdict"] else "—")
    return {"rollout_key": row["rollout_key"], "attempt_id": row["pk"], "round": row["round"], "label": label,
            "verdict": row["verdict"] or None, "reward": row["reward"], "is_censored": row["is_censored"]}


def attach_earlier_rounds(attempts: list[ProofAttempt]) -> None:
    """Set ``earlier_rounds`` on each attempt: the answers its chain of corrections went through before it, round 0
    (the first attempt) first; empty for a first attempt. One query per round back, whatever the page's length, and
    never more than ``MAX_TRAJECTORY_ROUNDS`` of them."""
    known: dict[int, dict] = {}
    wanted = {attempt.parent_id for attempt in attempts if attempt.parent_id}
    for _ in range(MAX_TRAJECTORY_ROUNDS):
        wanted -= known.keys()
        if not wanted:
            break
        rows = list(ProofAttempt.objects.filter(pk__in=wanted).values(*_ROUND_FIELDS))
        known.update((row["pk"], row) for row in rows)
        wanted = {row["parent_id"] for row in rows if row["parent_id"]}
    for attempt in attempts:
        chain: list[dict] = []
        parent_id = attempt.parent_id
        while parent_id in known and len(chain) < MAX_TRAJECTORY_ROUNDS:
            chain.insert(0, round_summary(known[parent_id]))
            parent_id = known[parent_id]["parent_id"]
        attempt.earlier_rounds = chain
