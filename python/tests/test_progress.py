"""The progress line of long commands on a terminal: step, elapsed time,
rate and ETA while the work goes on, a last "N steps in T" line; nothing of
it with --quiet or when stderr is not a terminal (a pseudo-terminal here)."""
import os
import pty
import re
import subprocess

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
CLI = os.environ.get("LOWP_CLI", "lowp")
EVAL = [CLI, "eval", "--model", os.path.join(DATA, "stories3M-hf"), "--sample", "4:64",
        "--weights", "q4_0,q8_0", "--threads", "1"]


def run_on_terminal(args):
    """(exit code, stdout, what the terminal showed of stderr)."""
    main, side = pty.openpty()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=side)
    os.close(side)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the command closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out = p.stdout.read()
    p.wait()
    os.close(main)
    return p.returncode, out.decode(), shown.decode(errors="replace")


def test_a_terminal_shows_elapsed_rate_eta_and_the_total_time():
    code, out, shown = run_on_terminal(EVAL)
    assert code == 0, shown
    steps = re.findall(r"\[(\d+)/(\d+)\][^\r]*?(\d+:\d\d) elapsed", shown)
    assert len(steps) >= 3
    assert all(int(i) <= int(n) for i, n, _ in steps)
    # From the second step on, the rate of the steps done and the time left.
    assert re.search(r"\[2/\d+\].*elapsed, [0-9.e+]+ steps/s, ETA \d+:\d\d", shown)
    total = steps[0][1]
    assert re.search(rf"(?<!\d){total} steps in \d+:\d\d\r?\n", shown)
    assert "kl" in out.lower()  # the report itself is on stdout, untouched


def test_quiet_and_pipes_show_nothing():
    _, _, shown = run_on_terminal(EVAL + ["--quiet"])
    assert "elapsed" not in shown and "steps in" not in shown
    r = subprocess.run(EVAL, capture_output=True, text=True)
    assert r.returncode == 0
    assert "elapsed" not in r.stderr and "steps in" not in r.stderr
