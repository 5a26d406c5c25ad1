#!/usr/bin/python3
"""Writes docs/api.md from the comments of include/ostore/*.h (the headers are
the authority). Usage: gen_api_doc.py ROOT [OUT]; tests/api_doc_test.py
checks that the committed page is what this makes, and that every public
declaration, type, field and enumerator has a comment.

How a header is read (parse_header): a small lexer splits it into comments,
preprocessor directives (a directive ends at a newline that is neither
escaped nor inside a comment), blank lines and code; whatever lies between
`#ifdef __cplusplus` and its `#endif` is dropped. Directives never become
part of a declaration: a comment followed by a directive is the macro's
and is dropped with it. A declaration is the code up to a `;` outside
braces (or a `static inline` function's closing brace). Its comment is the
block comment right above it (no blank line or directive between);
declarations on consecutive lines with no comment between form one group
under the first one's comment (ost_bytes and ost_bytearray). Inside a
struct or enum body the same holds for each field or enumerator, which may
also have a comment that starts on the line where it ends (`int x; /* ...
*/`). A banner comment (`/* ---- title ---- */`) starts a subsection."""
import re
import sys

TITLES = [("common.h", "Version and errors"), ("value.h", "Values"),
          ("pickle.h", "Pickling"), ("hooks.h", "Hooks"), ("store.h", "Store"),
          ("maps.h", "Ordered maps"), ("raw.h", "Raw access")]


def lex(text):
    """Tokens (kind, text, first line, last line): kind is comment,
    directive, blank (a blank line) or one of code's pieces: { } ; , or a
    run of other code (whitespace inside it kept)."""
    toks, i, n, line = [], 0, len(text), 1
    at_line_start = True
    skip = 0  # depth inside #ifdef __cplusplus
    code, code_line = [], 1

    def flush():
        s = "".join(code)
        if s.strip() and not skip:
            toks.append(("code", s, code_line, line))
        code.clear()

    while i < n:
        c = text[i]
        if c == "\n":
            # a blank line: only spaces up to the next newline
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "\n":
                flush()
                toks.append(("blank", "", line + 1, line + 1))
            if code:
                code.append(c)
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t":
            if code:
                code.append(c)
            i += 1
            continue
        if text.startswith("/*", i):
            end = text.index("*/", i + 2) + 2
            flush()
            body = text[i:end]
            if not skip:
                toks.append(("comment", body, line, line + body.count("\n")))
            line += body.count("\n")
            i = end
            at_line_start = False
            continue
        if c == "#" and at_line_start:
            flush()
            start, j = line, i
            while j < n and text[j] != "\n":
                if text.startswith("/*", j):
                    e = text.index("*/", j + 2) + 2
                    line += text[j:e].count("\n")
                    j = e
                    continue
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    line += 1
                    j += 2
                    continue
                j += 1
            d = text[i:j]
            if skip:
                if re.match(r"#\s*if", d):
                    skip += 1
                elif re.match(r"#\s*endif", d):
                    skip -= 1
            elif re.match(r"#\s*ifdef\s+__cplusplus\b", d):
                skip = 1
            else:
                toks.append(("directive", d, start, line))
            i = j
            continue
        at_line_start = False
        if c in "{};,":
            flush()
            if not skip:
                toks.append((c, c, line, line))
            i += 1
            continue
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if not code:
                code_line = line
            code.append(text[i:j + 1])
            i = j + 1
            continue
        if not code:
            code_line = line
        code.append(c)
        i += 1
    flush()
    return toks


def clean_comment(c):
    """A comment's text as one paragraph, without its delimiters and the
    stars that start its lines."""
    c = re.sub(r"^/\*\s?|\s?\*/$", "", c.strip())
    return " ".join(l.strip().lstrip("*").strip() for l in c.splitlines()).strip()


def banner(c):
    m = re.match(r"/\*\s*-{3,}\s*(.*?)\s*-{3,}\s*\*/$", c.strip())
    return m and m.group(1)


def statements(toks, sep):
    """Splits toks into statements ending at sep (';' or ','), outside
    braces; a statement's body tokens are those inside its outermost
    braces. Yields dicts: code (text with the body as { ... }), body,
    first, last (lines), lead (the comment above, no blank line or
    directive between, or None), trail (a comment that starts on the line
    the statement ends on), grouped (it starts on the line after the
    previous statement ended, with nothing between)."""
    out = []
    cur = None
    lead, lead_end = None, None  # pending comment and the line it ends on
    prev_end, clear = None, True  # previous statement's last line, and
    # whether nothing (comment, blank, directive) came since it
    depth = 0

    def close(t_line):
        nonlocal cur, prev_end, clear
        cur["last"] = t_line
        out.append(cur)
        prev_end, clear, cur = t_line, True, None

    for kind, text, first, last in toks:
        if cur is not None and depth > 0:
            if kind == "}":
                depth -= 1
                if depth == 0:
                    cur["code"].append(" { ... } ")
                    if cur["static"]:
                        close(last)
                    continue
            elif kind == "{":
                depth += 1
            cur["body"].append((kind, text, first, last))
            continue
        if kind == "comment" and cur is not None:
            if first == cur["lastline"]:
                cur["trail"] = text
            else:
                lead, lead_end = text, last
            continue
        if kind == "comment":
            if out and cur is None and clear and first == prev_end and out[-1]["trail"] is None:
                out[-1]["trail"] = text
                continue
            lead, lead_end = text, last
            clear = False
            if banner(text):
                out.append({"banner": banner(text), "first": first})
                lead = None
            continue
        if kind in ("blank", "directive"):
            lead, clear = None, False
            continue
        if cur is None:
            if kind == sep:
                continue
            grouped = bool(out) and "banner" not in out[-1] and clear and prev_end is not None \
                and first == prev_end + 1
            has_lead = lead is not None and first - lead_end in (0, 1)
            cur = {"code": [], "body": [], "first": first, "lead": lead if has_lead else None,
                   "trail": None, "grouped": grouped and not has_lead,
                   "static": text.lstrip().startswith("static"), "lastline": first}
            lead = None
        if kind == "{":
            depth = 1
            continue
        if kind == sep:
            close(last)
            continue
        cur["code"].append(text + " " if kind == "," else text)
        cur["lastline"] = last
    if cur is not None:
        close(cur["first"] if not cur["body"] else cur["body"][-1][3])
    for s in out:
        if "code" in s:
            s["code"] = " ".join("".join(s["code"]).split())
    return out


def parse_header(path):
    """The header's items in order: {"banner": title}, or a group
    {"comment", "decls", "line"}, each decl {"sig", "kind" (function,
    type, static), "name", "members": [(sig, comment, line)], "line"}.
    Also the list of what has no comment: "path:line what"."""
    text = open(path, encoding="utf-8").read()
    items, missing, after_skip = [], [], False
    for s in statements(lex(text), ";"):
        if "banner" in s:
            items.append({"banner": s["banner"]})
            continue
        code = s["code"]
        if re.fullmatch(r"struct \w+", code):
            after_skip = True  # a forward declaration of another library's type
            continue
        if code.startswith("OST_EXTERN "):
            kind, sig = "function", code[len("OST_EXTERN "):]
        elif code.startswith("static"):
            kind, sig = "static", re.sub(r"\s*\{ \.\.\. \}$", "", code)
        elif code.startswith("typedef") or code.startswith("enum"):
            kind, sig = "type", code
        else:
            raise SystemExit("%s:%d: cannot tell what this declares: %s" % (path, s["first"], code))
        if "(*" in sig:  # a function-pointer typedef
            name = re.search(r"\(\*\s*(\w+)\s*\)", sig).group(1)
        elif kind != "type":
            name = re.search(r"(\w+)\s*\(", sig).group(1)
        elif sig.startswith("enum"):
            name = "enum { %s, ... }" % re.match(r"\s*(\w+)", s["body"][0][1]).group(1)
        else:
            name = re.search(r"(\w+)$", sig).group(1)
        members = []
        if s["body"] and kind == "type":
            is_enum = re.match(r"(typedef\s+)?enum\b", sig) is not None
            for m in statements(s["body"], "," if is_enum else ";"):
                if "banner" in m:
                    continue
                mc = m["lead"] or m["trail"]
                members.append((m["code"], clean_comment(mc) if mc else "", m["first"]))
                if not mc:
                    missing.append("%s:%d %s field %s" % (path, m["first"], name, m["code"]))
        decl = {"sig": sig + ";", "kind": kind, "name": name, "members": members,
                "line": s["first"]}
        comment = s["lead"] or s["trail"]
        grouped, after_skip = s["grouped"] and not after_skip, False
        if grouped and items and "decls" in items[-1]:
            items[-1]["decls"].append(decl)
            continue
        if not comment:
            missing.append("%s:%d %s" % (path, s["first"], name))
        items.append({"comment": clean_comment(comment) if comment else "", "decls": [decl],
                      "line": s["first"]})
    return items, missing


def render(root):
    out = ["# API reference", "",
           "One header, `#include <ostore.h>`, and one library, `pkg-config --libs ostore`.",
           "The headers are the authority: every declaration there carries a comment",
           "saying what it does, who owns what and what it returns; this page gathers",
           "them by layer, with every public type and its fields (`scripts/gen_api_doc.py`",
           "writes it, a test checks it is current).",
           "", "## Rules that hold everywhere", "",
           "- **Errors.** A function that can fail returns 0 or a negative `OST_E*` code;",
           "  `ost_strerror(code)` and `ost_err_name(code)` describe it, and the handle",
           "  involved keeps a message with the details (`ost_writer_errmsg`,",
           "  `ost_reader_errmsg` with `ost_reader_erroffset`, `ost_store_errmsg`",
           "  (per thread), `ost_conn_errmsg`, `ost_loader_errmsg`; value calls such as",
           "  `ost_instance_getattr_ex` leave theirs in `ost_value_errmsg`, per thread).",
           "  `ost_errmsg(handle)` gives that message for any of those handles (NULL: the",
           "  value layer's), so one check macro serves every call.",
           "- **Ownership of values.** Constructors return a new reference. Functions that",
           "  put a value into a container *steal* the reference they are given, even when",
           "  they fail. Getters return borrowed references. Release with `ost_decref`, or",
           "  `ost_release` when a graph may hold cycles.",
           "- **Handles** (`ost_writer`, `ost_reader`, `ost_registry`, `ost_store`,",
           "  `ost_conn`, `ost_loader`, `ost_txn_hooks`) are made and freed by their own",
           "  functions; free functions accept NULL. A writer, reader, connection or",
           "  loader belongs to one thread at a time; a store is shared by threads.",
           "  The lifetime rules, as a numbered list, are in docs/tutorial.md",
           "  (\"Lifetimes\"): a connection's handle stays valid after its store",
           "  closes, until `ost_conn_close`.",
           "", "## Error codes", "", "| code | value | meaning |", "| --- | --- | --- |"]
    common = open(root + "/include/ostore/common.h", encoding="utf-8").read()
    for m in re.finditer(r'X\((\w+), (-\d+), "([^"]+)"\)', common):
        out.append("| `OST_%s` | %s | %s |" % m.groups())
    out.append("")
    missing = []
    for h, title in TITLES:
        items, miss = parse_header(root + "/include/ostore/" + h)
        missing += [m.replace(root + "/", "", 1) for m in miss]
        out += ["## %s (`include/ostore/%s`)" % (title, h), ""]
        for it in items:
            if "banner" in it:
                if out[-1] != "":
                    out.append("")
                out += ["### %s" % it["banner"][:1].upper() + it["banner"][1:], ""]
                continue
            first = True
            for d in it["decls"]:
                out.append(("- `%s`" if first else "  `%s`") % d["sig"] + "  ")
                first = False
            if it["comment"]:
                out.append("  " + it["comment"])
            else:
                out[-1] = out[-1].rstrip()
            for d in it["decls"]:
                for sig, comment, _ in d["members"]:
                    out.append("  - `%s`%s" % (sig, (": " + comment) if comment else ""))
        out.append("")
    return "\n".join(out), missing


if __name__ == "__main__":
    root = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) > 2 else root + "/docs/api.md"
    page, _ = render(root)
    open(out_path, "w", encoding="utf-8").write(page)
