"""The CLI's error behaviour.

Bad input (garbage, semantically bad pickles, truncated pickles): exit
status 1, nothing on stdout, exactly ONE line on stderr that names the error
(OST_E...) and the byte offset of the opcode that failed. For truncated
pickles the offset is computed here from pickletools' listing of the whole
pickle: the first opcode that does not fit in the truncated input (a FRAME
whose body is cut counts as that opcode), or the end of the input when it
stops between two opcodes.

Bad usage (no arguments, unknown command or subcommand, bad or missing
--protocol value, missing or extra FILE, unknown option): exit status 2,
nothing on stdout, and the usage on stderr.

usage: test_cli_errors.py OSTORE_CLI
"""
import concurrent.futures
import os
import pickle
import pickletools
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from interop_classes import Plain  # noqa: E402

CLI = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OSTORE_CLI")
GOOD = pickle.dumps([1, "a"], 2)

LINE_RE = re.compile(r"^ostore: .*\b(OST_E[A-Z0-9]+) at offset (\d+)\b.*\n\Z", re.S)


def run(args, data):
    p = subprocess.run([CLI] + args, input=data, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def check_bad_input(args, data, code, offset, what):
    """Returns a failure message or None. code/offset None: any."""
    rc, out, err = run(args, data)
    prefix = "%s: ostore %s" % (what, " ".join(args))
    if rc != 1:
        return "%s: exit status %d, want 1 (stderr %r)" % (prefix, rc, err[:200])
    if out:
        return "%s: wrote %d bytes to stdout: %r" % (prefix, len(out), out[:80])
    if err.count("\n") != 1 or not err.endswith("\n"):
        return "%s: stderr is not exactly one line: %r" % (prefix, err[:300])
    m = LINE_RE.match(err)
    if not m:
        return "%s: stderr does not name an OST_E error and an offset: %r" % (prefix, err)
    if code is not None and m.group(1) != code:
        return "%s: error %s, want %s: %r" % (prefix, m.group(1), code, err)
    if offset is not None and int(m.group(2)) != offset:
        return "%s: offset %s, want %d: %r" % (prefix, m.group(2), offset, err)
    return None


# (input, error for show and repickle, offset) for pickles that fail to
# load; the bytes are well-formed opcodes for most, so `dis` lists them.
BAD_PICKLES = [
    (b"", "OST_ETRUNCATED", 0),
    (b"\xff", "OST_EBADOPCODE", 0),
    (b"\x80\x02N\xff.", "OST_EBADOPCODE", 3),
    (b"\x80\x06N.", "OST_EPROTOCOL", 0),
    (b"\x80\x02h\x05.", "OST_EMEMO", 2),
    (b"\x80\x02.", "OST_EBADPICKLE", 2),
    (b"\x80\x02e.", "OST_EBADPICKLE", 2),
    (b"\x80\x02N\x85N\x86\x87\x87.", "OST_EBADPICKLE", 6),
    (b"\x80\x02\x82\x01.", "OST_EUNSUPPORTED", 2),
    (b"\x80\x04\x8c\x02\xc3\x28.", "OST_EUTF8", 2),
    (b"\x80\x02N", "OST_ETRUNCATED", 3),
    (b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N.", "OST_ETRUNCATED", 2),
    (b"\x80\x02X\xff\xff\xff\x7fabc", "OST_ETRUNCATED", 2),
    (b"\x80\x02\x8a\x05\x01", "OST_ETRUNCATED", 2),
    (b"hello world", "OST_EMEMO", 0),
    (b"\x00\x01\x02garbage", "OST_EBADOPCODE", 0),
]

# input that `dis` itself must reject (bytes that are no opcode, or cut)
BAD_FOR_DIS = [
    (b"", "OST_ETRUNCATED", 0),
    (b"\xff", "OST_EBADOPCODE", 0),
    (b"\x80\x02N\xff.", "OST_EBADOPCODE", 3),
    (b"\x80\x02N", "OST_ETRUNCATED", 3),
    (b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00N.", "OST_ETRUNCATED", 2),
    (b"\x80\x02X\xff\xff\xff\x7fabc", "OST_ETRUNCATED", 2),
    (b"\x00\x01\x02garbage", "OST_EBADOPCODE", 0),
]


def op_spans(full):
    """(opcode name, argument, start, end) of every opcode of a pickle."""
    ops = list(pickletools.genops(full))
    return [(op.name, arg, pos, ops[i + 1][2] if i + 1 < len(ops) else len(full))
            for i, (op, arg, pos) in enumerate(ops)]


def truncation_offset(spans, k):
    """Offset at which loading the first k bytes must fail."""
    for name, arg, pos, end in spans:
        if name == "FRAME" and pos + 9 + arg > k:
            return pos
        if end > k:
            return pos
    raise AssertionError("a cut pickle that is complete?")


SAMPLE = {"a": [1, 2.5, "xyz", b"bb", (None, True)], "big": 2 ** 70, "i": Plain(x=1),
          "u": "\u20ac\ud800", "s": {7}}

BAD_USAGE = [
    [],
    ["frobnicate"],
    ["pickle"],
    ["pickle", "frob", "-"],
    ["pickle", "show"],
    ["pickle", "show", "-", "extra"],
    ["pickle", "show", "--bogus", "-"],
    ["pickle", "dis", "--protocol", "3", "-"],
    ["pickle", "repickle", "--protocol"],
    ["pickle", "repickle", "--protocol", "1", "-"],
    ["pickle", "repickle", "--protocol", "6", "-"],
    ["pickle", "repickle", "--protocol", "0", "-"],
    ["pickle", "repickle", "--protocol", "-3", "-"],
    ["pickle", "repickle", "--protocol", "x", "-"],
    ["pickle", "repickle", "--protocol", "", "-"],
    ["pickle", "repickle", "--protocol", "4x", "-"],
    ["pickle", "repickle", "--protocol", "99999999999999999999", "-"],
    ["pickle", "repickle", "--no-frame"],
]


def main():
    if not CLI or not os.path.exists(CLI):
        print("usage: test_cli_errors.py OSTORE_CLI")
        return 2
    jobs = []  # (args, data, code, offset, what)
    for data, code, off in BAD_PICKLES:
        for args in (["pickle", "show", "-"], ["pickle", "repickle", "--protocol", "3", "-"]):
            jobs.append((args, data, code, off, "bad pickle %r" % data[:24]))
    for data, code, off in BAD_FOR_DIS:
        jobs.append((["pickle", "dis", "-"], data, code, off, "bad pickle %r" % data[:24]))
    # a missing file: one line, no offset to give
    missing = "/nonexistent/ostore-test.pkl"
    # truncated pickles: show at every cut for protocols 2 and 4 and at every
    # fourth for the others, repickle and dis at every ninth (the reader's
    # unit tests cut at every byte; here it is about what the CLI reports)
    for proto in range(6):
        full = pickle.dumps(SAMPLE, proto)
        spans = op_spans(full)
        for k in range(len(full)):
            off = truncation_offset(spans, k)
            what = "protocol %d pickle of %d bytes cut at %d" % (proto, len(full), k)
            if proto in (2, 4) or k % 4 == 0:
                jobs.append((["pickle", "show", "-"], full[:k], "OST_ETRUNCATED", off, what))
            if k % 9 == 1:
                jobs.append((["pickle", "repickle", "-"], full[:k], "OST_ETRUNCATED", off, what))
            if k % 9 == 5:
                jobs.append((["pickle", "dis", "-"], full[:k], "OST_ETRUNCATED", off, what))

    failures = []
    with concurrent.futures.ThreadPoolExecutor(max(2, min(8, os.cpu_count() or 2))) as ex:
        for msg in ex.map(lambda j: check_bad_input(*j), jobs):
            if msg:
                failures.append(msg)

    for sub in ("show", "dis", "repickle"):
        rc, out, err = run(["pickle", sub, missing], b"")
        if rc != 1 or out or err.count("\n") != 1 or missing not in err:
            failures.append("missing file, %s: exit %d, stdout %r, stderr %r"
                            % (sub, rc, out[:80], err))

    # the good pickle works, so the failures above are about the input
    rc, out, err = run(["pickle", "show", "-"], GOOD)
    if rc != 0 or out != b"[1, 'a']\n" or err:
        failures.append("good pickle: exit %d, stdout %r, stderr %r" % (rc, out, err))

    for args in BAD_USAGE:
        rc, out, err = run(args, GOOD)
        if rc != 2 or out or "usage: ostore" not in err:
            failures.append("bad usage `ostore %s`: exit %d (want 2), stdout %r, stderr %r"
                            % (" ".join(args), rc, out[:80], err[:300]))

    print("cli_errors: %d bad inputs (%d truncations), %d bad usages"
          % (len(jobs) + 3, sum(1 for j in jobs if "cut at" in j[4]), len(BAD_USAGE)))
    for f in failures[:30]:
        print("FAIL", f)
    if failures:
        print("cli_errors: %d FAILURES" % len(failures))
        return 1
    print("cli_errors: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
