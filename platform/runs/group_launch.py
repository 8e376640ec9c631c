"""The launch contract of a run group: one configuration on several seeds, or a small grid over launch fields with
each cell on several seeds (issue 49). What it defends against: a click that queues a sweep the lab cannot run
(bounded seeds, grid fields, values and runs), a grid that varies what the seeds vary, and a cell the single launch
would refuse slipping in beside accepted ones: every member is an ordinary ``LaunchRequest`` that
``launch_contract.parse`` accepted, so a group obeys the single launch's bounds run by run. The form, the API
(``POST /api/runs/groups/``) and ``leanrl groups launch`` all come through ``parse_group``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import Field, create_model

from runs.launch_contract import (
    NAME_MAX_CHARS,
    SEED_BOUND,
    SETTABLE_FIELDS,
    LaunchError,
    LaunchRequest,
    number_text,
    parse,
)
from trainer.config import RunConfig
from trainer.fields import read_value, split_assignment


MAX_SEEDS = 8  # seeds per cell: beyond it a person wants a bigger study than a form should start
MAX_GRID_FIELDS = 3  # the issue's "small grid": more fields than this is a sweep tool's job
MAX_GRID_VALUES = 5  # values per grid field
MAX_GROUP_RUNS = 32  # cells × seeds: what one click may queue, whatever the owner's quota
GROUP_FIELDS = {
    "seeds": f"Runs of each configuration, seeds seed, seed+1, …; 1 to {MAX_SEEDS}. More than 1 (or a grid) launches a "
             "group whose page compares them.",
    "grid": f"Launch fields to vary, each with its values ({{\"learning_rate\": [1e-5, 2e-5]}}): every combination is "
            f"a cell, each on `seeds` seeds; at most {MAX_GRID_FIELDS} fields of {MAX_GRID_VALUES} values, "
            f"{MAX_GROUP_RUNS} runs in all; the seed is varied by `seeds`, never here.",
}


GroupLaunchRequest = create_model(
    "GroupLaunchRequest", __base__=LaunchRequest,
    __doc__="A group launch: the launch fields, and seeds and grid (parse_group checks them).",
    seeds=(int | None, Field(None, description=GROUP_FIELDS["seeds"])),
    grid=(dict[str, list[float]] | None, Field(None, description=GROUP_FIELDS["grid"])),
)


class GroupMember(NamedTuple):
    cell: dict[str, Any]  # the grid's values of this run ({} without a grid)
    seed: int
    request: LaunchRequest


@dataclass(frozen=True)
class GroupRequest:
    """A group launch: the launch fields every member shares, the seeds, the grid; ``members`` are the runs, each an
    ordinary LaunchRequest that ``parse`` accepted, so every run of a group obeys the single launch's bounds."""

    base: LaunchRequest
    seeds: int
    grid: dict[str, list]
    members: tuple[GroupMember, ...]

    @property
    def cells(self) -> list[dict[str, Any]]:
        return list({_cell_key(member.cell): member.cell for member in self.members}.values())


def _cell_key(cell: dict[str, Any]) -> tuple:
    return tuple(sorted(cell.items()))


def cell_text(cell: dict[str, Any]) -> str:
    """A cell as the group's page and its runs' names write it: ``learning_rate=2e-5, temperature=0.7``."""
    return ", ".join(f"{name}={number_text(value)}" for name, value in cell.items())


def member_name(group_name: str, cell: dict[str, Any], seed: int) -> str:
    suffix = " · ".join(part for part in (cell_text(cell), f"seed {seed}") if part)
    return f"{group_name[:NAME_MAX_CHARS - len(suffix) - 3]} · {suffix}"


def read_grid(value: Any) -> Any:
    """A grid as the API takes it (an object) or as the form's box holds it, one ``FIELD=VALUE, VALUE, …`` a line
    (``learning_rate=1e-5, 2e-5``), each value read as trainer/fields.py reads one; anything else is handed on for
    parse_group to refuse with its reason."""
    if not isinstance(value, str):
        return value
    grid: dict[str, Any] = {}
    for line in filter(None, (line.strip() for line in value.splitlines())):
        try:
            name, raw = split_assignment(line, example="learning_rate=1e-5, 2e-5")
        except ValueError as error:
            raise LaunchError("the grid is not FIELD=VALUE, VALUE lines", {"grid": [str(error)]}) from None
        parsed = read_value(raw)
        grid[name] = parsed if isinstance(parsed, list) else [read_value(part) for part in raw.split(",")]
    return grid


def is_group_launch(data: dict[str, Any]) -> bool:
    """Whether a launch asks for a group: more than one seed, or a grid."""
    seeds, grid = data.get("seeds"), data.get("grid")
    return bool(grid) or (seeds not in (None, "") and str(seeds) != "1")


def parse_group(data: dict[str, Any]) -> GroupRequest:
    """A GroupRequest from the launch fields plus ``seeds`` and ``grid``; LaunchError with an error per field."""
    if not isinstance(data, dict):
        raise LaunchError("a launch is a JSON object of the launch fields", {"__all__": [f"got {type(data).__name__}"]})
    data = dict(data)
    seeds, grid = data.pop("seeds", None), read_grid(data.pop("grid", None) or {})
    errors: dict[str, list[str]] = {}
    if seeds in (None, ""):
        seeds = 1
    if isinstance(seeds, str) and seeds.strip().isdigit():
        seeds = int(seeds)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        errors["seeds"] = [f"must be a whole number from 1 to {MAX_SEEDS} (got {seeds!r})"]
    errors.update(_grid_problems(grid))
    base = parse(data)  # the shared fields' own errors, as a single launch gives them
    if errors:
        raise LaunchError("the group launch is invalid", errors)
    cells = [{}]
    for name, values in grid.items():
        cells = [{**cell, name: value} for cell in cells for value in values]
    if len(cells) * seeds > MAX_GROUP_RUNS:
        raise LaunchError("the group is too large", {"seeds": [
            f"{len(cells)} cells × {seeds} seeds = {len(cells) * seeds} runs, more than the {MAX_GROUP_RUNS} one launch "
            f"may start: use fewer seeds or fewer grid values"]})
    first_seed = base.seed if base.seed is not None else RunConfig.from_preset(base.preset).schedule.seed
    if first_seed + seeds - 1 > SEED_BOUND.high:
        raise LaunchError("the seeds run past their bound", {"seed": [
            f"seeds {first_seed} to {first_seed + seeds - 1} pass the largest seed, {SEED_BOUND.high:,}: start lower"]})
    members = []
    for cell in cells:
        for seed in range(first_seed, first_seed + seeds):
            fields = {**data, **cell, "seed": seed, "name": member_name(base.name, cell, seed)}
            try:
                members.append(GroupMember(cell, seed, parse(fields)))
            except LaunchError as error:
                messages = [f"{cell_text(cell)}: {message}" for field_errors in error.field_errors.values()
                            for message in field_errors]
                raise LaunchError("a cell of the grid cannot be launched", {"grid": messages}) from None
    return GroupRequest(base, seeds, {name: list(values) for name, values in grid.items()}, tuple(members))


def _grid_problems(grid: Any) -> dict[str, list[str]]:
    if not isinstance(grid, dict):
        return {"grid": [f"is an object of launch field → list of values (got {grid!r})"]}
    problems = []
    if len(grid) > MAX_GRID_FIELDS:
        problems.append(f"varies {len(grid)} fields ({', '.join(grid)}); at most {MAX_GRID_FIELDS}")
    for name, values in grid.items():
        if name == "seed":
            problems.append("varies seed: the seeds come from `seeds` (the number of runs of each cell), not the grid")
        elif name not in SETTABLE_FIELDS:
            problems.append(f"{name!r} is not a number a launch may set; a grid varies one of "
                            f"{', '.join(field for field in SETTABLE_FIELDS if field != 'seed')}")
        elif not isinstance(values, list) or not 2 <= len(values) <= MAX_GRID_VALUES:
            problems.append(f"{name} needs a list of 2 to {MAX_GRID_VALUES} values (got {values!r})")
        elif any(isinstance(value, bool) or not isinstance(value, int | float) for value in values):
            problems.append(f"{name}'s values are numbers (got {values!r})")
        elif len(set(values)) != len(values):
            problems.append(f"{name} repeats a value (got {values!r}): each cell once")
    return {"grid": problems} if problems else {}
