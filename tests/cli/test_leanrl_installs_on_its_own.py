"""``pip install ./leanrl`` gives a laptop the client alone: a wheel of leanrl/ with its HTTP dependencies, which
runs where neither the trainer nor the platform is importable."""

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_wheel(into: Path) -> Path:
    source = into / "source"
    shutil.copytree(REPO / "leanrl", source / "leanrl", ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", str(source / "leanrl"), "-w", str(into / "wheels")], check=True, timeout=300)
    (wheel,) = (into / "wheels").glob("leanrl-*.whl")
    return wheel


def test_its_wheel_holds_the_client_alone_and_asks_only_for_its_http_dependencies(tmp_path):
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        packaged = sorted(name for name in archive.namelist() if not name.startswith("leanrl-"))
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
        entry_points = archive.read(next(n for n in archive.namelist() if n.endswith("entry_points.txt"))).decode()
    assert packaged == ["leanrl/__init__.py", "leanrl/__main__.py", "leanrl/cli.py", "leanrl/client.py",
                        "leanrl/fields.py"]
    requirements = sorted(line.split(":", 1)[1].strip().split(">")[0] for line in metadata.splitlines()
                          if line.startswith("Requires-Dist:"))
    assert requirements == ["httpx", "tqdm"]
    assert "leanrl = leanrl.cli:main" in entry_points


def test_the_installed_client_runs_where_the_trainer_and_the_platform_are_not_importable(tmp_path):
    wheel = build_wheel(tmp_path)
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    # -S: none of this environment's .pth files, so the project's editable install (trainer, the platform's
    # apps) is out of reach; the environment's site-packages stays on the path for httpx and tqdm.
    script = (f"import sys; sys.path[:0] = [{str(target)!r}, {sysconfig.get_paths()['purelib']!r}]\n"
              "import leanrl.cli\n"
              "assert leanrl.cli.__file__.startswith(sys.path[0]), leanrl.cli.__file__\n"
              "for ours in ('trainer', 'runs', 'deploy'):\n"
              "    try:\n"
              "        __import__(ours)\n"
              "    except ModuleNotFoundError:\n"
              "        pass\n"
              "    else:\n"
              "        raise SystemExit(f'{ours} is importable: the check proves nothing')\n"
              "sys.argv = ['leanrl', 'runs', 'launch', '--help']\n"
              "leanrl.cli.main()\n")
    result = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: leanrl runs launch [-h] [--fields] [FIELD=VALUE ...]")
