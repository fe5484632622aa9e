"""The README's "Try it" copies photos: each must be shipped or made by a line before it (a trial
found alice1.jpg and crowd.jpg named but nowhere to be had)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parents[1]


def try_it_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Try it", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_every_photo_the_try_it_copies_is_shipped_or_made_first(tmp_path: Path) -> None:
    lines = try_it_block()
    made = [line for line in lines if line.startswith(".venv/bin/python -c ")]
    assert made, "no line makes the photos"
    code = shlex.split(made[0])[2]
    for line in lines[:lines.index(made[0])]:
        if line.startswith("mkdir -p "):
            subprocess.run(shlex.split(line), cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, capture_output=True)
    copied = [w for line in lines if line.startswith("cp ") for w in shlex.split(line)[1:-1]]
    assert copied == ["var/photos/alice1.jpg", "var/photos/alice2.jpg", "var/photos/crowd.jpg"]
    for name in copied:
        picture = cv2.imread(str(tmp_path / name))
        assert picture is not None and picture.shape[0] >= 200, name
    assert lines.index(made[0]) < min(i for i, line in enumerate(lines) if line.startswith("cp "))


def first_command() -> list[str]:
    """The README's first shell block: install and run."""
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [step.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")
            for step in line.split("&&")]


def test_the_first_command_gives_the_clean_install_of_the_install_script() -> None:
    """Issue 35, item 14: the first command was `pip install .`, which leaves opencv-python and
    opencv-python-headless both owning cv2/ (insightface requires the one, ffwatchd the other), so
    `check` warned at once. It installs through scripts/install.sh, whose last step leaves one owner
    (tests/test_install.py runs that step's plan and the script's plumbing)."""
    steps = first_command()
    assert not [s for s in steps if re.search(r"\bpip install\b", s)], f"a bare pip install: {steps}"
    install = [i for i, s in enumerate(steps) if shlex.split(s)[:2] == ["sh", "scripts/install.sh"]]
    run = [i for i, s in enumerate(steps) if shlex.split(s)[:2] == [".venv/bin/ffwatchd", "run"]]
    assert install and run and install[0] < run[0], steps
    assert len(shlex.split(steps[install[0]])) == 2, "the default venv (.venv), which the run step uses"
    script = (ROOT / "scripts/install.sh").read_text()
    assert "venv=${1:-.venv}" in script and script.rstrip().splitlines()[-1].startswith(
        'exec "$venv/bin/python" -m ffwatchd.install')


def test_the_readme_writes_its_photos_and_results_under_var_not_the_checkout_root(tmp_path: Path) -> None:
    """Issue 42, item 22: "Try it" left alice1.jpg, crowd.jpg and out.jpg in the checkout's root;
    every file the README's shell lines write (the photos made, process's -o) lies under var/."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    commands = [line for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    made = [m for line in commands for m in re.findall(r"imsave\('([^']+)'", line)]
    outputs = [w[i + 1] for line in commands if "ffwatchd process" in line
               for w in [shlex.split(line.split("#")[0])] for i, x in enumerate(w) if x == "-o"]
    assert made and outputs, (made, outputs)
    for path in made + outputs:
        assert path.startswith("var/"), f"the README writes {path} into the checkout's root"
    gitignore = (ROOT / ".gitignore").read_text().splitlines()
    assert "/var/*" in gitignore, "var/ is ignored, so the photos are not files git sees"
