#!/usr/bin/env python3
"""Write etcdlock(3) from include/etcdlock.h: the header's comments are the
API's documentation, so the man page says exactly what they say.

    man3.py HEADER VERSION OUTDIR

writes OUTDIR/etcdlock.3 (every constant, type and function) and one
OUTDIR/etcdlock_<name>.3 per function that sources it (`man 3 etcdlock_lock`).
"""
import re
import sys


def roff(text):
    """Escape text for roff: backslashes, and a leading dot or quote."""
    text = text.replace("\\", "\\e")
    return "\n".join(("\\&" + l if l.startswith((".", "'")) else l) for l in text.split("\n"))


def items(header):
    """(comment, declaration) for each documented top-level item, in order."""
    lines = header.split("\n")
    out, comment, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("//"):
            comment.append(line[2:].strip())
            i += 1
            continue
        if line.startswith("/**"):  # cbindgen's doxy style: /** ... */, " * " before each line
            while i + 1 < len(lines) and not lines[i].rstrip().endswith("*/"):
                i += 1
                if not lines[i].strip().startswith("*/"):
                    comment.append(lines[i].strip()[1:].strip())
            i += 1
            continue
        if comment and line.strip():
            decl = [line]
            # A declaration ends with ';' (function, typedef) or a #define line.
            def done():
                if decl[0].startswith("#define"):
                    return True
                if "{" in decl[0]:  # a struct: up to its closing brace
                    return decl[-1].startswith("}")
                return decl[-1].rstrip().endswith(";")
            while not done() and i + 1 < len(lines):
                i += 1
                decl.append(lines[i])
            out.append((" ".join(comment), "\n".join(decl)))
        comment = []
        i += 1
    return out


def main():
    header_path, version, outdir = sys.argv[1:4]
    header = open(header_path).read()
    intro = re.match(r"/\*(.*?)\*/", header, re.S).group(1)
    intro = "\n".join(l.strip().lstrip("*").rstrip() for l in intro.split("\n")).strip()
    # Doxygen's commands: the file's name is the page's, the brief its first line.
    intro = re.sub(r"^\s*@file .*\n", "", intro).strip().replace("@brief The ", "etcdlock.h: the ", 1)
    body = header.split("#define ETCDLOCK_H", 1)[1]
    consts, types, funcs = [], [], []
    for comment, decl in items(body):
        if decl.startswith("#define"):
            consts.append((decl.split()[1], comment))
        elif decl.startswith("typedef") or decl.startswith("struct"):
            types.append((comment, decl))
        else:
            name = re.search(r"\b(etcdlock_\w+)\s*\(", decl)
            if name:
                funcs.append((name.group(1), comment, decl.strip()))
    p = []
    p.append(f'.TH ETCDLOCK 3 "" "etcdlock {version}" "etcdlock C API"')
    p.append(".SH NAME\netcdlock \\- a distributed lock on etcd, for C and C++")
    p.append(".SH SYNOPSIS\n.nf\n.B #include <etcdlock.h>\n.PP")
    for name, _, decl in funcs:
        p.append(roff(re.sub(r"\s+", " ", decl)))
    p.append(".fi\n.PP\nLink with\n.BR \"pkg-config --cflags --libs etcdlock\" \" (shared) or \" \"etcdlock-static\" \" (static).\"")
    p.append(".SH DESCRIPTION\n.nf\n" + roff(intro) + "\n.fi")
    p.append(".SH FUNCTIONS")
    for name, comment, decl in funcs:
        p.append(f".SS {name}\n.nf\n{roff(re.sub(r'[ ]+', ' ', decl))}\n.fi\n.PP\n{roff(comment)}")
    p.append(".SH TYPES")
    for comment, decl in types:
        p.append(f".nf\n{roff(decl)}\n.fi\n.PP\n{roff(comment)}")
    p.append(".SH CONSTANTS\n.TP")
    p.append("\n.TP\n".join(f".B {n}\n{roff(c)}" for n, c in consts))
    p.append(".SH RETURN VALUE\nEvery function that can fail returns ETCDLOCK_OK (0) or one of the "
             "ETCDLOCK_* status codes above; etcdlock_last_error_message(3) describes the last failure "
             "on the calling thread.")
    p.append(".SH SEE ALSO\n.BR etcdlock (1),\n.BR etcd (1)")
    open(f"{outdir}/etcdlock.3", "w").write("\n".join(p) + "\n")
    for name, _, _ in funcs:
        open(f"{outdir}/{name}.3", "w").write(".so man3/etcdlock.3\n")
    print(f"etcdlock.3: {len(funcs)} functions, {len(types)} types, {len(consts)} constants")


if __name__ == "__main__":
    main()
