"""Uploads that cannot hurt the web process, against the real ASGI server and Celery worker:
a 9 KB Parquet file with one 256 MB row and a CSV file with one 200 MB line are refused, and the
web process's memory, sampled with psutil all along, stays under 300 MB."""

import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from accounts.models import ApiToken, TokenScope
from promptsets.models import Promptset, PromptsetUpload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

MB = 1024 * 1024
WEB_MEMORY_LIMIT = 300 * MB


class PeakMemory:
    """The highest resident set size of a process (and its children), sampled every 5 ms while in use."""

    def __init__(self, pid: int):
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()

    def _rss(self) -> int:
        total = self.process.memory_info().rss
        for child in self.process.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.005)

    def __enter__(self):
        self.peak = self._rss()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("bombs")
    parquet = folder / "one-huge-row.parquet"
    pq.write_table(pa.table({"formal_statement": pa.array(["a" * (256 * MB)])}), parquet,
                   compression="zstd", compression_level=22)
    csv = folder / "one-huge-line.csv"
    with csv.open("wb") as out:
        out.write(b"name,formal_statement\nfine,theorem t : 1 + 1 = 2 := by\nhuge,")
        chunk = b"a" * MB
        for _ in range(200):
            out.write(chunk)
        out.write(b"\n")
    return {"parquet": parquet, "csv": csv}


@pytest.fixture
def api(platform_processes, alice):
    _, raw = ApiToken.issue(alice, "bomb thrower", scope=TokenScope.LAUNCH)
    with httpx.Client(base_url=platform_processes["url"], headers={"Authorization": f"Bearer {raw}"},
                      timeout=120) as client:
        yield client


def upload(api, path: Path, name: str, endpoint: str = "/api/promptsets/"):
    with path.open("rb") as file:
        return api.post(endpoint, data={"name": name}, files={"file": (path.name, file)})


def finished_status(api, response, timeout_s: float = 300) -> dict:
    """The upload's status once the worker is done with it (``response`` accepted it with 202)."""
    assert response.status_code == 202, response.text
    status_url = response.json()["status_url"]
    deadline = time.monotonic() + timeout_s
    while not (status := api.get(status_url).json())["is_finished"]:
        assert time.monotonic() < deadline, f"the worker did not finish the upload in {timeout_s:.0f} s: {status}"
        time.sleep(0.5)
    return status


def test_a_9_kb_parquet_file_with_one_256_mb_row_is_refused_from_its_metadata(api, platform_processes, bombs):
    assert bombs["parquet"].stat().st_size < 10 * 1024
    with PeakMemory(platform_processes["web"].process.pid) as web:
        response = upload(api, bombs["parquet"], "parquet bomb")
    print(f"\nparquet bomb ({bombs['parquet'].stat().st_size:,} bytes): web process peak {web.peak / MB:.0f} MB")
    assert response.status_code == 422, response.text
    assert "holds 268,435,510 bytes uncompressed" in response.json()["detail"] and "over the limit of 1,048,576 bytes" in response.json()["detail"]
    assert web.peak < WEB_MEMORY_LIMIT
    assert not Promptset.objects.exists() and not PromptsetUpload.objects.exists()


def test_a_csv_file_with_one_200_mb_line_is_refused_row_by_row_in_bounded_reads(api, platform_processes, bombs):
    with PeakMemory(platform_processes["web"].process.pid) as web:
        status = finished_status(api, upload(api, bombs["csv"], "csv bomb"))
    stored = PromptsetUpload.objects.get()
    print(f"\ncsv bomb ({bombs['csv'].stat().st_size / MB:.0f} MB): web process peak {web.peak / MB:.0f} MB; "
          f"the worker's checking child peaked at {stored.peak_memory_bytes / MB:.0f} MB")
    assert status["state"] == "rejected", status
    (rejection,) = status["report"]["rejections"]
    assert rejection["row"] == 2 and "the row is 209,715,206 bytes long; the limit is 1,048,576" in rejection["reason"]
    assert web.peak < WEB_MEMORY_LIMIT
    assert stored.peak_memory_bytes < WEB_MEMORY_LIMIT  # bounded reads: the checking child never held the line
    assert not Promptset.objects.exists() and not Path(stored.staged_path).exists()


def test_a_dry_run_of_the_csv_bomb_is_read_by_the_worker_never_the_web_process(api, platform_processes, bombs):
    with PeakMemory(platform_processes["web"].process.pid) as web:
        status = finished_status(api, upload(api, bombs["csv"], "csv bomb, dry run", endpoint="/api/promptsets/validate"))
    stored = PromptsetUpload.objects.get()
    assert (status["state"], status["dry_run"]) == ("checked", True), status
    (rejection,) = status["report"]["rejections"]
    assert rejection["row"] == 2 and "the row is 209,715,206 bytes long; the limit is 1,048,576" in rejection["reason"]
    assert web.peak < WEB_MEMORY_LIMIT
    assert stored.peak_memory_bytes < WEB_MEMORY_LIMIT  # the worker's checking child read it, in bounded reads
    assert not Promptset.objects.exists() and not Path(stored.staged_path).exists()
