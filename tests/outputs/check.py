#!/usr/bin/env python3
"""Golden outputs of the lowp command and the Python module.

    check.py --lowp BUILD/cli/lowp [--python BUILD/python] record|check

runs every line of commands.txt (and, with --python, every call of
python_calls.py) from the repository root and either writes what it printed
to expected/ or compares with what is there. Each case keeps the exit code,
stdout, stderr and the size and SHA-256 of every file the command wrote;
temporary paths are written $IN and $OUT. A refactor must leave all of it
equal: `check` lists every case that differs, with a diff, and exits 1.

The last bits of the double sums (SQNR, RMSE, cosine) depend on the SIMD
target the kernels dispatch to (kernels/quantize.h), so a machine whose best
target is not the recording machine's (or the sanitized build, AVX2 only)
prints other last digits. A case that is not equal byte for byte passes when
it is equal but for numbers with a fraction or exponent that agree to a
relative 1e-9 (integers, hashes, names and messages exactly; whitespace may
differ, since tables pad to the widest cell); `--exact` refuses that too.
"""
import argparse, difflib, hashlib, json, os, re, shlex, shutil, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write_inputs(d):
    """Deterministic inputs: specials, subnormals, and 4096 values of an LCG."""
    specials = [0.0, -0.0, 1.0, -1.0, 0.1, 300.0, 448.0, 464.0, 65504.0, 65520.0, 1e-8, -3e-5,
                5.9604645e-08, 1.1754944e-38, 1e-45, 3.4028235e38, float("inf"), float("-inf"),
                float("nan"), 2.5, 3.5, -0.75, 6.0, 7.0]
    values, x = list(specials), 12345
    while len(values) < 4096:
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        mantissa = ((x >> 11) / 2**53) * 2 - 1
        values.append(mantissa * 2.0 ** (((x >> 3) % 40) - 20))
    with open(os.path.join(d, "values.f32"), "wb") as f:
        f.write(struct.pack("<%df" % len(values), *values))
    with open(os.path.join(d, "values.f16"), "wb") as f:
        for v in values:
            try:
                f.write(struct.pack("<e", v))
            except (OverflowError, struct.error):
                f.write(struct.pack("<H", 0x7C00 if v > 0 else 0xFC00))
    with open(os.path.join(d, "codes.e4m3"), "wb") as f:
        f.write(bytes(range(256)))
    with open(os.path.join(d, "codes.fp4"), "wb") as f:
        f.write(bytes(range(256)) + b"\x07")
    import numpy as np
    finite = np.array([v for v in values if np.isfinite(v) and abs(v) < 1e4], dtype=np.float64)
    np.save(os.path.join(d, "a.npy"), finite[:3 * 70].astype(np.float32).reshape(3, 70))
    np.save(os.path.join(d, "h.npy"), finite[:256].astype(np.float16).reshape(4, 64))
    np.save(os.path.join(d, "d.npy"), finite[1000:1100])
    # Token ids for lowp eval: 3 sequences of 24 from the LCG, BOS first; and
    # one id past the bundled model's vocabulary (512).
    ids = np.array([(v * 1e6) % 512 for v in values[100:172]], dtype=np.int64).reshape(3, 24)
    ids[:, 0] = 1
    np.save(os.path.join(d, "tokens.npy"), ids.astype(np.int32))
    ids[1, 5] = 512
    np.save(os.path.join(d, "badtokens.npy"), ids)


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def tokens(text):
    parts, last = [], 0
    for m in NUMBER.finditer(text):
        parts.append(("t", " ".join(text[last:m.start()].split())))
        parts.append(("n", m.group()))
        last = m.end()
    parts.append(("t", " ".join(text[last:].split())))
    return [p for p in parts if p != ("t", "")]


def nearly_equal(want, got):
    """Equal but for the last digits of non-integer numbers (see above)."""
    a, b = tokens(want), tokens(got)
    if len(a) != len(b):
        return False
    for (kind_a, x), (kind_b, y) in zip(a, b):
        if kind_a != kind_b:
            return False
        if x == y:
            continue
        if kind_a == "t" or not any(c in x + y for c in ".eE"):
            return False  # text, or an integer
        fx, fy = float(x), float(y)
        if abs(fx - fy) > 1e-9 * max(abs(fx), abs(fy)):
            return False
    return True


def slug(line):
    digest = hashlib.sha1(line.encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9.=,-]+", "_", line)[:80].strip("_") + "-" + digest


def files_of(out, text):
    """Each file's name, size and SHA-256; a text file (HTML) in full."""
    rows = []
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name), "rb") as f:
            data = f.read()
        if name.endswith(".html"):
            rows.append("%s\n%s" % (name, text(data)))
        else:
            rows.append("%s %d %s" % (name, len(data), hashlib.sha256(data).hexdigest()))
    return rows


def signature(path):
    """What any write to a file changes: its ctime, which no program can set,
    with its inode, size and mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def snapshot(root):
    """The bytes and signature of every file under tests/data: a command must
    not change one (plan --html onto an input is refused; if that ever broke,
    the checkout's data would be overwritten)."""
    files = {}
    for d, _, names in os.walk(os.path.join(root, "tests", "data")):
        for name in names:
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                files[path] = (f.read(), signature(path))
    return files


def restore_changed(files):
    """Writes back any file of the snapshot that changed; returns their paths.
    Only a file whose signature moved is read (44 MB read back after each of
    300 cases was most of the check's time under ASan)."""
    changed = []
    for path, (data, sig) in files.items():
        if signature(path) == sig:
            continue
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            with open(path, "wb") as f:
                f.write(data)
            changed.append(path)
        files[path] = (data, signature(path))
    return changed


def run_command(lowp, line, inp, out):
    for name in os.listdir(out):
        os.unlink(os.path.join(out, name))
    argv = [a.replace("$IN", inp).replace("$OUT", out) for a in shlex.split(line)]
    env = dict(os.environ, LC_ALL="C")
    env.pop("LOWP_DATA_DIR", None)
    p = subprocess.run([lowp] + argv, cwd=ROOT, capture_output=True, env=env, timeout=600)
    def text(b):
        return (b.decode("utf-8", "replace").replace(out, "$OUT").replace(inp, "$IN")
                .replace(ROOT, "$ROOT"))
    return ("$ lowp %s\nexit %d\n--- stdout\n%s--- stderr\n%s--- files\n%s" %
            (line, p.returncode, text(p.stdout), text(p.stderr),
             "".join(r + "\n" for r in files_of(out, text))))


def cases(args, inp, out):
    with open(os.path.join(HERE, "commands.txt")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                yield "cli-" + slug(line), lambda line=line: run_command(args.lowp, line, inp, out)
    if args.python:
        sys.path.insert(0, os.path.abspath(args.python))
        sys.path.insert(0, HERE)
        import python_calls
        for label, text in python_calls.run(inp, out, ROOT):
            yield "py-" + slug(label), lambda text=text: text


def main():
    # One OpenBLAS kernel on every x86-64 CPU with AVX2, so that the forward
    # pass's sums (lowp eval, plan --eval) are the same bits wherever the
    # cases run; without it each CPU family has its own sgemm kernel.
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    ap = argparse.ArgumentParser()
    ap.add_argument("--lowp", required=True)
    ap.add_argument("--python")
    ap.add_argument("--expected", default=os.path.join(HERE, "expected"))
    ap.add_argument("--exact", action="store_true", help="byte for byte, no tolerance")
    ap.add_argument("mode", choices=["record", "check"])
    args = ap.parse_args()
    args.lowp = os.path.abspath(args.lowp)
    scratch = tempfile.mkdtemp(prefix="lowp-outputs-")
    inp, out = os.path.join(scratch, "in"), os.path.join(scratch, "out")
    os.mkdir(inp)
    os.mkdir(out)
    write_inputs(inp)
    try:
        if args.mode == "record":
            shutil.rmtree(args.expected, ignore_errors=True)
            os.makedirs(args.expected)
        seen, failed, near = set(), [], []
        data = snapshot(ROOT)
        for name, produce in cases(args, inp, out):
            assert name not in seen, "two cases named " + name
            seen.add(name)
            got = produce()
            for path in restore_changed(data):
                print("%s: %s was changed by the command (restored)" % (name, path))
                failed.append(name)
            path = os.path.join(args.expected, name + ".txt")
            if args.mode == "record":
                with open(path, "w") as f:
                    f.write(got)
                continue
            want = open(path).read() if os.path.exists(path) else ""
            if got != want and not args.exact and want and nearly_equal(want, got):
                near.append(name)
                continue
            if got != want:
                failed.append(name)
                sys.stdout.writelines(difflib.unified_diff(
                    want.splitlines(True), got.splitlines(True), "expected/" + name, "now", n=2))
        if args.mode == "check":
            kept = [f[:-4] for f in os.listdir(args.expected)]
            stale = sorted(n for n in set(kept) - seen if args.python or n.startswith("cli-"))
            for name in stale:
                print("expected/%s.txt: no such case any more" % name)
            print("%d cases, %d equal but for the last digits of double sums, %d differ%s" %
                  (len(seen), len(near), len(failed),
                   "" if not failed else ": " + ", ".join(failed)))
            return 1 if failed or stale else 0
        print("recorded %d cases in %s" % (len(seen), args.expected))
        return 0
    finally:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    sys.exit(main())
