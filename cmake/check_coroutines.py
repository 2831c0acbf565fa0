#!/usr/bin/env python3
"""check_coroutines: find the coroutine forms g++ 12 miscompiles (galay-kernel's docs/guide/compilers.md).

    check_coroutines.py [-I DIR]... [--runner NAME]... [--condition-macro NAME]... FILE|DIR...

Reads C++ sources (a directory: every C++ file and markdown page under it; a markdown page: its
```cpp blocks) and prints one line per unsafe form,

    file:line: <form>: <the safe form>

and exits 1 when it found any, 0 when none, 2 on a usage error or a file it cannot read. The
three forms:

  co_await in a condition      `if (!co_await s.send_all(b))`, `while (auto c = co_await l.accept())`,
                               also `for (...)`, `switch (...)`, `do ... while (...)`, and the
                               argument of a macro that expands to a condition (assert, GoogleTest's
                               EXPECT_* / ASSERT_*, and those named with --condition-macro)
  aggregate temporary          `co_await ch.send(Pub{topic, payload})`: a braced temporary of an
                               aggregate type (a struct or class this run has seen defined without a
                               constructor, whose members are not all trivially destructible; or a
                               `{.member = ...}` matching one) in a statement that contains a
                               co_await; and a lambda that captures by value there
                               (`co_await spawn_blocking([s] {...})`): g++ 12 destroys both twice
  capturing lambda coroutine   `spawn([&]() -> Task<void> {...}())`: a lambda coroutine with captures
                               called on the spot whose task is not finished within the statement
                               (not awaited with co_await there, not run by a blocking runner:
                               block_on and the names given with --runner)

It is a lexical and syntactic check, not a compiler: it does not expand macros (beyond the
condition macros above), does not resolve overloads or types it has not seen, and cannot follow a
task or a lambda across statements. What it does not catch is listed in galay-kernel's
docs/guide/compilers.md. A line that is knowingly kept may carry the comment `coroutine-hazard-ok` (on that line
or the one above) with the reason.

-I DIR: also read the headers this file includes from DIR (`#include "x.hpp"` is looked up next
to the including file first), to learn which types are aggregates; findings are reported only
for the files named on the command line. --stamp FILE: write FILE when nothing is found (a build
step's output).
"""
import argparse
import os
import re
import sys

TOOL = "check_coroutines"
CXX_EXTENSIONS = (".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".h", ".ipp", ".tpp",
                  ".inl", ".inc")
SUPPRESS = "coroutine-hazard-ok"

SAFE_CONDITION = ("bind the result first: `auto r = co_await ...; if (!r) ...` "
                  "(a loop: `for (;;) { auto r = co_await ...; if (!r) break; ... }`)")
SAFE_AGGREGATE = ("name it first (`{t} v{{...}}; co_await f(std::move(v));`), build it inside the "
                  "awaitable (`emplace(...)`), or give {t} a constructor")
SAFE_CLOSURE = ("name the lambda first and move it in (`auto fn = [x] {...}; "
                "co_await f(std::move(fn));`), or capture by reference")
SAFE_LAMBDA = ("pass the values as parameters (`[](int n) -> Task<void> {...}(n)`), or keep the "
               "lambda alive until its task ends")

KEYWORDS_BEFORE_LAMBDA = {"return", "co_await", "co_return", "co_yield", "throw", "case", "else",
                          "do", "and", "or", "not"}
BLOCK_AFTER_IDENT = {"else", "do", "try", "const", "noexcept", "override", "final", "mutable",
                     "volatile"}
TYPE_KEYWORDS = {"struct", "class", "union", "enum", "namespace"}
# Types and builtins that are never aggregates (a braced temporary of them is a constructor call).
NEVER_AGGREGATE_PREFIXES = ("std::",)

# ------------------------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------------------------

PUNCT3 = ("...", "->*", "<=>", "<<=", ">>=")
PUNCT2 = ("::", "->", "&&", "||", "==", "!=", "<=", ">=", "++", "--", "+=", "-=", "*=", "/=",
          "%=", "&=", "|=", "^=", ".*", "<<")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
NUMBER_RE = re.compile(r"\.?[0-9](?:'?[0-9A-Za-z_.]|[eEpP][+-])*")
STRING_PREFIX_RE = re.compile(r"(?:u8|u|U|L)?R?\"|(?:u8|u|U|L)?'")


class Token:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind = kind  # "id", "num", "str", "punct"
        self.text = text
        self.line = line

    def __repr__(self):
        return f"{self.text}@{self.line}"


def tokenize(text):
    """Tokens of `text` without comments and preprocessor lines; plus the lines of every
    `#include` (name, quoted) and the lines whose comments carry the suppression marker."""
    tokens, includes, suppressed = [], [], {}
    i, n, line = 0, len(text), 1
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":  # a continued line
            i += 2
            line += 1
            continue
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            if SUPPRESS in text[i:end]:
                suppressed[line] = at_line_start  # a comment line covers the next line too
            i = end
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            body = text[i:end]
            if SUPPRESS in body:
                suppressed[line + body.count("\n")] = at_line_start
            line += body.count("\n")
            i = end
            continue
        if c == "#" and at_line_start:  # a directive, with its continued lines
            j = i
            while True:
                end = text.find("\n", j)
                end = n if end < 0 else end
                if end > i and text[end - 1] == "\\":
                    j = end + 1
                    continue
                break
            directive = text[i:end]
            m = re.match(r'#\s*include\s*([<"])([^>"]+)[>"]', directive)
            if m:
                includes.append((m.group(2), m.group(1) == '"'))
            # Comments after a directive may carry the marker too.
            if SUPPRESS in directive:
                suppressed[line] = False
            line += directive.count("\n")
            i = end
            continue
        at_line_start = False
        m = STRING_PREFIX_RE.match(text, i)
        if m and (c in "\"'" or not IDENT_RE.match(text, i) or
                  IDENT_RE.match(text, i).end() == m.end() - 1):
            prefix = m.group(0)
            if prefix.endswith('"') and "R" in prefix:  # raw string R"delim( ... )delim"
                open_paren = text.find("(", m.end())
                delim = text[m.end():open_paren]
                close = text.find(")" + delim + '"', open_paren)
                end = n if close < 0 else close + len(delim) + 2
            else:
                quote = prefix[-1]
                j = m.end()
                while j < n and text[j] != quote and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                end = min(j + 1, n)
            body = text[i:end]
            tokens.append(Token("str", body, line))
            line += body.count("\n")
            i = end
            continue
        m = IDENT_RE.match(text, i)
        if m:
            tokens.append(Token("id", m.group(0), line))
            i = m.end()
            continue
        m = NUMBER_RE.match(text, i)
        if m and (c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit())):
            tokens.append(Token("num", m.group(0), line))
            i = m.end()
            continue
        for p in PUNCT3 + PUNCT2:
            if text.startswith(p, i):
                tokens.append(Token("punct", p, line))
                i += len(p)
                break
        else:
            tokens.append(Token("punct", c, line))
            i += 1
    return tokens, includes, suppressed


# ------------------------------------------------------------------------------------------------
# Structure: matching brackets, lambdas, blocks
# ------------------------------------------------------------------------------------------------

OPEN = {"(": ")", "[": "]", "{": "}"}


def match_brackets(tokens):
    """match[i] = index of the bracket that closes/opens tokens[i] (None when unbalanced)."""
    match = [None] * len(tokens)
    stack = []
    for i, t in enumerate(tokens):
        if t.kind != "punct":
            continue
        if t.text in OPEN:
            stack.append(i)
        elif t.text in (")", "]", "}"):
            # Recover from an unbalanced file (a macro body, a conditional block) by unwinding to
            # the nearest opener of this kind.
            for k in range(len(stack) - 1, -1, -1):
                if OPEN[tokens[stack[k]].text] == t.text:
                    j = stack[k]
                    del stack[k:]
                    match[i], match[j] = j, i
                    break
    return match


class Lambda:
    __slots__ = ("start", "capture_end", "body", "body_end", "call_end", "coroutine")

    def __init__(self, start, capture_end, body, body_end):
        self.start = start  # the '['
        self.capture_end = capture_end  # its ']'
        self.body = body  # '{'
        self.body_end = body_end  # '}'
        self.call_end = None  # ')' when called on the spot
        self.coroutine = False


def is_lambda_introducer(tokens, i):
    if i + 1 < len(tokens) and tokens[i + 1].text == "[":
        return False  # an attribute [[...]]
    if i > 0 and tokens[i - 1].text == "[":
        return False
    if i == 0:
        return True
    p = tokens[i - 1]
    if p.kind == "id":
        return p.text in KEYWORDS_BEFORE_LAMBDA
    if p.kind in ("num", "str"):
        return False
    if p.text in (")", "]"):
        return False
    if p.text in ("&", "&&") and i > 1 and tokens[i - 2].text == "auto":
        return False  # auto& [a, b] = ...: a structured binding
    if p.text == "operator" or (i > 1 and tokens[i - 2].text == "operator"):
        return False
    return True


def find_lambdas(tokens, match):
    lambdas = []
    n = len(tokens)
    for i, t in enumerate(tokens):
        if t.text != "[" or match[i] is None or not is_lambda_introducer(tokens, i):
            continue
        j = match[i] + 1
        if j < n and tokens[j].text == "<":  # [] <class T> (T x) ...
            depth = 0
            while j < n:
                if tokens[j].text == "<":
                    depth += 1
                elif tokens[j].text == ">":
                    depth -= 1
                    if depth == 0:
                        j += 1
                        break
                elif tokens[j].text in (";", "{"):
                    break
                j += 1
        if j < n and tokens[j].text == "(":
            if match[j] is None:
                continue
            j = match[j] + 1
        # Specifiers, a trailing return type, attributes, until the body.
        while j < n and tokens[j].text != "{":
            if tokens[j].text in ("(", "[") and match[j] is not None:
                j = match[j] + 1
                continue
            if tokens[j].text in (";", ",", ")", "]", "}", "=", "{"):
                break
            j += 1
        if j >= n or tokens[j].text != "{" or match[j] is None:
            continue
        lam = Lambda(i, match[i], j, match[j])
        k = lam.body_end + 1
        if k < n and tokens[k].text == "(" and match[k] is not None:
            lam.call_end = match[k]
        lambdas.append(lam)
    # A lambda is a coroutine when its own body (not a nested lambda's) has co_await, co_return
    # or co_yield.
    inner = {}
    for lam in lambdas:
        inner[lam.body] = lam
    for lam in lambdas:
        k = lam.body + 1
        while k < lam.body_end:
            if k in inner and inner[k] is not lam:
                k = inner[k].body_end + 1
                continue
            if tokens[k].text in ("co_await", "co_return", "co_yield"):
                lam.coroutine = True
                break
            k += 1
    return lambdas


def declared_type(tokens, name, before, types, depth=0):
    """The type (its tokens) of the nearest declaration of `name` before token `before` (a
    variable or a parameter), or None when the checker cannot tell. `auto` is followed into its
    initializer when that is a number, a static_cast, another name or a member of one."""
    k = before - 1
    while k > 0:
        t = tokens[k]
        if t.kind == "id" and t.text == name and k + 1 < len(tokens) and \
                tokens[k + 1].text in ("=", "{", "(", ";", ",", ")", "["):
            p = tokens[k - 1]
            if (p.kind == "id" and p.text not in KEYWORDS_BEFORE_LAMBDA | {"goto", "new"}) or \
                    p.text in ("*", "&", "&&", ">"):
                typ, j, angle = [], k - 1, 0
                while j >= 0:
                    tj = tokens[j].text
                    if tj == ">":
                        angle += 1
                    elif tj == "<":
                        angle -= 1
                    elif not (tokens[j].kind == "id" or tj in ("::", "*", "&", "&&") or
                              (angle > 0 and tj not in (";", "{", "}"))):
                        break
                    typ.insert(0, tj)
                    j -= 1
                if typ and typ[-1] == "auto" or typ == ["const", "auto"]:
                    return init_type(tokens, k + 1, types, depth)
                return typ
        k -= 1
    return None


def init_type(tokens, k, types, depth):
    """The type of the initializer after `name` at token k (`= 3`, `= static_cast<T>(...)`,
    `= other`, `= obj.member`), or None."""
    if depth > 4 or k + 1 >= len(tokens) or tokens[k].text not in ("=", "{", "("):
        return None
    first = tokens[k + 1]
    if first.kind == "num":
        return ["long"]
    if first.text in ("static_cast", "reinterpret_cast") and tokens[k + 2].text == "<":
        typ, j = [], k + 3
        while j < len(tokens) and tokens[j].text != ">":
            typ.append(tokens[j].text)
            j += 1
        return typ
    if first.text == "std" and k + 5 < len(tokens) and tokens[k + 3].text == "move":
        first, k = tokens[k + 5], k + 4  # std::move(name)
    if first.kind == "id":
        typ = declared_type(tokens, first.text, k, types, depth + 1)
        if typ is not None and k + 3 < len(tokens) and tokens[k + 2].text in (".", "->"):
            info = types.get(next((t for t in reversed(typ) if IDENT_RE.fullmatch(t)), ""))
            return info.member_type.get(tokens[k + 3].text) if info else None
        if tokens[k + 2].text in (";", ",", ")", "}"):
            return typ
    return None


def captures_by_value(tokens, lam, types=None):
    """Whether a lambda's capture list copies something into the closure that has a destructor
    to run: `=`, `x`, `x = e`, `*this`, `x...` (not `&`, `&x`, `&x = e`, `this`, which hold
    references, nor a copy of a number, a pointer or a view the checker can see declared)."""
    items, item, depth = [], [], 0
    for t in tokens[lam.start + 1:lam.capture_end]:
        if t.text in ("(", "[", "{", "<"):
            depth += 1
        elif t.text in (")", "]", "}", ">"):
            depth -= 1
        if t.text == "," and depth == 0:
            items.append(item)
            item = []
        else:
            item.append(t.text)
    if item:
        items.append(item)
    for it in items:
        if it[0] in ("&", "&&") or it == ["this"]:
            continue
        if types is not None and IDENT_RE.fullmatch(it[0]) and (len(it) == 1 or it[1] == "="):
            typ = declared_type(tokens, it[0], lam.start, types) if len(it) == 1 else \
                init_type(tokens, lam.start + 1 + tokens_index(tokens, lam, it), types, 0)
            if typ is not None and type_is_trivial(typ, types, set()):
                continue  # a copy of something trivially destructible: harmless
        return True  # =, name, name = init, *this, name...
    return False


def tokens_index(tokens, lam, item):
    """Offset (from the capture list's '[' + 1) of the '=' of the init-capture `item`."""
    for k in range(lam.start + 1, lam.capture_end):
        if tokens[k].text == item[0] and tokens[k + 1].text == "=":
            return k + 1 - (lam.start + 1)
    return 0


def designators(tokens, match, k):
    """The member names of a designated initializer `{.a = 1, .b{2}}` opening at k (empty when
    it is not one)."""
    names = set()
    j = k + 1
    while j < match[k]:
        if tokens[j].text == "." and j + 1 < match[k] and tokens[j + 1].kind == "id" and \
                tokens[j - 1].text in ("{", ","):
            names.add(tokens[j + 1].text)
        if tokens[j].text in ("(", "[", "{") and match[j] is not None:
            j = match[j] + 1
            continue
        j += 1
    return names


def is_block_brace(tokens, match, i, lambda_bodies):
    """Whether the '{' at i opens a block (statements) rather than a braced initializer."""
    if i in lambda_bodies:
        return True
    if i == 0:
        return True
    p = tokens[i - 1]
    if p.text in (";", "}", ")", ":", "{"):
        if p.text == "{" and not is_block_brace(tokens, match, i - 1, lambda_bodies):
            return False  # { { ... } } inside an initializer
        return True
    if p.kind == "id" and p.text in BLOCK_AFTER_IDENT:
        return True
    if p.kind == "str":  # extern "C" {
        return True
    # struct X : Base<T> {, namespace a::b {, enum class E : int {, a function's trailing
    # return type `auto f() -> Task<void> {`: look back over this declaration's tokens.
    k = i - 1
    while k >= 0:
        t = tokens[k]
        if t.text in (")", "]") and match[k] is not None:
            k = match[k] - 1
            continue
        if t.text in (";", "{", "}"):
            break
        if t.text in ("(", "[", "=", ",", "return", "co_await", "co_return", "co_yield"):
            return False
        if t.kind == "id" and t.text in TYPE_KEYWORDS:
            return True
        if t.text == "->" and k > 0 and tokens[k - 1].text == ")":
            return True
        k -= 1
    return False


# ------------------------------------------------------------------------------------------------
# Types: which names are aggregates
# ------------------------------------------------------------------------------------------------


FUNDAMENTAL = {"bool", "char", "char8_t", "char16_t", "char32_t", "wchar_t", "short", "int",
               "long", "signed", "unsigned", "float", "double", "void", "auto", "size_t",
               "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "int8_t", "int16_t", "int32_t",
               "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "byte", "nullptr_t",
               "pid_t", "off_t", "socklen_t", "time_t"}
# Library types known to have a trivial destructor (views, handles, clocks and durations).
TRIVIAL_LIBRARY = {"string_view", "span", "coroutine_handle", "duration", "time_point",
                   "nanoseconds", "microseconds", "milliseconds", "seconds", "minutes", "hours",
                   "steady_clock", "system_clock", "source_location", "in_place_t", "monostate",
                   "atomic", "error_code", "errc", "iovec", "timespec", "sockaddr",
                   "sockaddr_in", "sockaddr_in6", "sockaddr_storage", "sockaddr_un"}
QUALIFIERS = {"const", "volatile", "mutable", "constexpr", "inline", "typename", "struct",
              "class", "enum", "alignas"}


def template_open(tokens, j):
    """The index of the '<' that opens the template arguments closed by the '>' at j, or None
    when a statement or block boundary comes first."""
    depth = 0
    while j >= 0:
        if tokens[j].text == ">":
            depth += 1
        elif tokens[j].text == "<":
            depth -= 1
            if depth == 0:
                return j
        elif tokens[j].text in (";", "{", "}"):
            return None
        j -= 1
    return None


class TypeInfo:
    """What the checker knows of a class: aggregate or not, its destructor trivial or not (None:
    unknown), its data members' names."""
    __slots__ = ("aggregate", "trivial", "members", "member_types", "member_type", "user_dtor")

    def __init__(self):
        self.aggregate = True
        self.trivial = None
        self.members = set()
        self.member_types = []
        self.member_type = {}
        self.user_dtor = False


def learn_types(tokens, match, types):
    """Record in `types` (name -> TypeInfo) every class defined in `tokens`, and every enum (a
    TypeInfo that is trivial and not an aggregate)."""
    n = len(tokens)
    for i, t in enumerate(tokens):
        if t.kind != "id":
            continue
        if t.text == "enum":
            j = i + 1
            if j < n and tokens[j].text in ("class", "struct"):
                j += 1
            if j < n and tokens[j].kind == "id":
                info = TypeInfo()
                info.aggregate, info.trivial = False, True
                types.setdefault(tokens[j].text, info)
            continue
        if t.text == "using" and i + 3 < n and tokens[i + 1].kind == "id" and \
                tokens[i + 2].text == "=":
            # An alias (`using OpCode = OpKind;`): a member of that type is what it names.
            end = i + 3
            while end < n and tokens[end].text not in (";", "{", "}"):
                end += 1
            if end < n and tokens[end].text == ";":
                types.setdefault("using " + tokens[i + 1].text, [x.text for x in tokens[i + 3:end]])
            continue
        if t.text not in ("struct", "class", "union"):
            continue
        if i > 0 and tokens[i - 1].text == "enum":
            continue
        j = i + 1
        while j < n and tokens[j].text == "[" and match[j] is not None:  # [[nodiscard]]
            j = match[j] + 1
        if j >= n or tokens[j].kind != "id" or tokens[j].text == "alignas":
            continue
        name = tokens[j].text
        k = j + 1
        info = TypeInfo()
        angle = 0
        while k < n and tokens[k].text not in ("{", ";", "(", ")", "="):
            if tokens[k].text == "<":
                angle += 1
            elif tokens[k].text == ">":
                angle -= 1
            elif tokens[k].text == "," and angle < 0:
                break  # template <class T, class U> parameter list
            elif tokens[k].text in ("virtual", "private", "protected") and angle == 0:
                info.aggregate = False  # a virtual or non-public base
            k += 1
        if k >= n or tokens[k].text != "{" or match[k] is None or angle < 0:
            continue  # a declaration, an elaborated type, a template parameter
        read_members(tokens, match, name, k, match[k], t.text == "class", info)
        old = types.get(name)
        if old is None or not isinstance(old, TypeInfo):
            types[name] = info
        else:  # two classes of one name (namespaces): keep what makes the check report more
            old.aggregate = old.aggregate or info.aggregate
            old.members |= info.members
            old.member_types += info.member_types
            old.member_type.update(info.member_type)
            old.user_dtor = old.user_dtor or info.user_dtor
    return types


def read_members(tokens, match, name, body, end, private, info):
    """Fill `info` from the body of class `name` (tokens body..end, the braces)."""
    m = body + 1
    decl = []
    while m < end:
        tm = tokens[m]
        if tm.text in ("public", "private", "protected") and m + 1 < end and \
                tokens[m + 1].text == ":":
            private = tm.text != "public"
            m += 2
            decl = []
            continue
        if tm.text == "{" and match[m] is not None:
            nested = next((decl[i + 1] for i, x in enumerate(decl[:-1])
                           if x.text in ("struct", "class", "union", "enum")), None)
            if decl and decl[-1].text in (")", "const", "noexcept", "override", "final") or \
                    nested is not None:
                m = match[m] + 1  # a function body or a nested type: not a member
                if m < end and tokens[m].text == ";":
                    m += 1
                    decl = []
                else:  # struct Inner {...} member;: a member of the nested type
                    decl = [nested] if nested is not None else []
                continue
            decl.extend(tokens[m:match[m] + 1])  # a default member initializer {...}
            m = match[m] + 1
            continue
        if tm.text in ("(", "[") and match[m] is not None:
            decl.extend(tokens[m:match[m] + 1])
            m = match[m] + 1
            continue
        if tm.text == ";":
            data_member(name, decl, private, info)
            decl = []
            m += 1
            continue
        decl.append(tm)
        m += 1
    info.trivial = None  # decided once every type is known (resolve_trivial)


def data_member(name, decl, private, info):
    """One member declaration `decl` (without its ';') of class `name`."""
    if not decl:
        return
    texts = [d.text for d in decl]
    if texts[0] in ("static", "using", "typedef", "friend", "template", "static_assert",
                    "enum"):
        if texts[0] == "using" and len(texts) >= 4 and texts[2] == "::" and texts[1] == texts[3]:
            info.aggregate = False  # using Base::Base: inherited constructors
        return
    if "virtual" in texts:
        info.aggregate = False
    # A constructor or destructor: Name(...), ~Name(...), explicit Name(...).
    for k, t in enumerate(texts):
        if t == name and k + 1 < len(texts) and texts[k + 1] == "(":
            if k > 0 and texts[k - 1] == "~":
                info.user_dtor = not (texts[-2:] == ["=", "default"])
            else:
                info.aggregate = False
            return
    # A member function: an identifier followed by '(' (outside template arguments) before any
    # '=' or '{'.
    depth = 0
    for k, t in enumerate(texts):
        if t in ("=", "{") and depth == 0:
            break
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif t == "(" and depth == 0 and k > 0 and texts[k - 1] != "alignas" and \
                (decl[k - 1].kind == "id" or texts[k - 1] in (">", "]")):
            return
    if private:
        info.aggregate = False
    # The declarators: `Type a = 1, *b`: the type is what comes before the first name.
    cut = len(texts)
    for k, t in enumerate(texts):
        if t in ("=", "{", ":", "["):
            cut = k
            break
    head = texts[:cut]
    if not head:
        return
    member = head[-1]
    info.members.add(member)
    info.member_types.append(head[:-1])
    info.member_type[member] = head[:-1]


def type_is_trivial(type_tokens, types, seen):
    """Whether a member of type `type_tokens` has a trivial destructor, as far as the checker
    knows (an unknown class: no)."""
    toks = [t for t in type_tokens if t not in QUALIFIERS]
    outer, depth = [], 0  # the tokens outside template arguments
    for t in toks:
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif depth == 0:
            outer.append(t)
    if "*" in outer or "&" in outer or "&&" in outer:
        return True  # a pointer or a reference
    # The name: the last identifier outside template arguments.
    depth, last = 0, None
    for t in toks:
        if t == "<":
            depth += 1
        elif t == ">":
            depth -= 1
        elif depth == 0 and IDENT_RE.fullmatch(t):
            last = t
    if last is None:
        return False
    if all(t in FUNDAMENTAL or t in ("std", "::") for t in toks):
        return True
    if last in FUNDAMENTAL or last in TRIVIAL_LIBRARY:
        return True
    info = types.get(last)
    alias = types.get("using " + last)
    if info is None and alias is not None and last not in seen:
        return type_is_trivial(alias, types, seen | {last})
    if info is None or last in seen:
        return False
    return trivial(last, types, seen | {last})


def trivial(name, types, seen=frozenset()):
    info = types.get(name)
    if info is None:
        return False
    if info.trivial is None:
        info.trivial = not info.user_dtor and all(
            type_is_trivial(mt, types, seen | {name}) for mt in info.member_types)
    return info.trivial


# ------------------------------------------------------------------------------------------------
# The checks
# ------------------------------------------------------------------------------------------------


class Checker:
    def __init__(self, runners, condition_macros):
        self.runners = set(runners)
        self.condition_macros = set(condition_macros)

    def is_condition_macro(self, name):
        if name in self.condition_macros or name == "assert":
            return True
        return re.match(r"(EXPECT|ASSERT)_[A-Z0-9_]+$", name) is not None

    def check(self, tokens, types, suppressed):
        match = match_brackets(tokens)
        lambdas = find_lambdas(tokens, match)
        lambda_at = {lam.start: lam for lam in lambdas}
        body_of = {lam.body: lam for lam in lambdas}
        findings = []

        def report(line, form, safe):
            if line in suppressed or suppressed.get(line - 1):
                return
            findings.append((line, form, safe))

        # Spans of nested lambda bodies, skipped when a range is searched.
        def tokens_in(lo, hi):
            k = lo
            while k < hi:
                if k in body_of:
                    k = body_of[k].body_end + 1
                    continue
                yield k
                k += 1

        def co_await_in(lo, hi):
            for k in tokens_in(lo, hi):
                if tokens[k].text == "co_await":
                    return k
            return None

        # 1. co_await in a condition.
        for i, t in enumerate(tokens):
            if t.kind != "id":
                continue
            head = None
            if t.text in ("if", "while", "for", "switch"):
                j = i + 1
                if j < len(tokens) and tokens[j].text == "constexpr":
                    j += 1
                if j < len(tokens) and tokens[j].text == "(":
                    head = j
                what = t.text
            elif self.is_condition_macro(t.text) and i + 1 < len(tokens) and \
                    tokens[i + 1].text == "(" and (i == 0 or tokens[i - 1].text not in
                                                    (".", "->", "::", "define")):
                head = i + 1
                what = t.text + "()"
            if head is None or match[head] is None:
                continue
            lo = head + 1
            if what == "for":  # a range-for's range is evaluated once, as a declaration's value
                colon = next((j for j in tokens_in(head + 1, match[head])
                              if tokens[j].text in (":", ";", "?")), None)
                if colon is not None and tokens[colon].text == ":":
                    lo = match[head]
            k = co_await_in(lo, match[head])
            if k is not None:
                report(tokens[k].line, f"co_await in {what} condition"
                       if not what.endswith("()") else f"co_await in the condition of {what}",
                       SAFE_CONDITION)

        # Statements: ranges ending at ';' (or a block) at the top level of each block.
        statements = self.statements(tokens, match, body_of)

        # 2. aggregate temporaries in a statement with a co_await.
        for lo, hi in statements:
            if co_await_in(lo, hi) is None:
                continue
            for k in tokens_in(lo, hi):
                if tokens[k].text != "{" or match[k] is None or k in body_of:
                    continue
                name = self.braced_type(tokens, k)
                if name is not None and name.startswith(NEVER_AGGREGATE_PREFIXES):
                    continue
                short = name.split("::")[-1] if name is not None else None
                if short is None:  # {.a = ..., .b = ...}: an aggregate with those members
                    fields = designators(tokens, match, k)
                    if not fields:
                        continue
                    short = next((t for t, i in sorted(types.items())
                                  if isinstance(i, TypeInfo) and i.aggregate and
                                  fields <= i.members and not trivial(t, types)), None)
                    if short is None:
                        continue
                    name = short
                info = types.get(short)
                if info is None or not info.aggregate or trivial(short, types):
                    continue
                report(tokens[k].line,
                       f"aggregate temporary {name or ''}{{...}} in a statement with co_await",
                       SAFE_AGGREGATE.format(t=name or "the type"))

        # 2b. lambda temporaries that capture by value, in a statement with a co_await: g++ 12
        # builds a closure as it builds an aggregate, and destroys it twice the same way.
        for lo, hi in statements:
            if co_await_in(lo, hi) is None:
                continue
            for k in tokens_in(lo, hi):
                lam = lambda_at.get(k)
                if lam is None or not captures_by_value(tokens, lam, types):
                    continue
                report(tokens[k].line,
                       "lambda temporary capturing by value in a statement with co_await",
                       SAFE_CLOSURE)

        # 3. capturing lambda coroutines called on the spot whose task escapes the statement.
        enclosing = self.enclosing_calls(tokens, match)
        for lam in lambdas:
            if not lam.coroutine or lam.call_end is None or lam.capture_end == lam.start + 1:
                continue
            if self.finished_within_statement(tokens, match, lam, enclosing, set(body_of)):
                continue
            report(tokens[lam.start].line,
                   "capturing lambda coroutine called on the spot, its task outlives the lambda",
                   SAFE_LAMBDA)
        return findings

    @staticmethod
    def braced_type(tokens, k):
        """The type named right before the '{' at k (`Pub{`, `ns::Pub{`, `Pub<int>{`), or None
        when the brace does not follow a type name: a declared variable (`Pub v{`), a braced
        argument (`f({...})`)."""
        j = k - 1
        if j >= 0 and tokens[j].text == ">":  # Name<...>{
            j = template_open(tokens, j)
            if j is None:
                return None
            j -= 1
        if j < 0 or tokens[j].kind != "id" or tokens[j].text in KEYWORDS_BEFORE_LAMBDA:
            return None
        parts = [tokens[j].text]
        while j >= 2 and tokens[j - 1].text == "::" and tokens[j - 2].kind == "id":
            j -= 2
            parts.insert(0, tokens[j].text)
        before = tokens[j - 1] if j > 0 else None
        if before is not None and (
                (before.kind == "id" and before.text not in KEYWORDS_BEFORE_LAMBDA) or
                before.text in ("*", "&", "&&", ">", "::")):
            return None  # `Type var{...}`: a variable being declared
        return "::".join(parts)

    def statements(self, tokens, match, body_of):
        """(lo, hi) token ranges of the statements of the file and of every lambda body; a
        statement does not contain the blocks it opens (an if's body is statements of its own),
        nor the bodies of the lambdas it contains."""
        lambda_bodies = set(body_of)
        out = self._block_statements(tokens, match, 0, len(tokens), body_of, lambda_bodies)
        for lam in body_of.values():
            out.extend(self._block_statements(tokens, match, lam.body + 1, lam.body_end,
                                              body_of, lambda_bodies))
        return out

    def _block_statements(self, tokens, match, lo_, hi, body_of, lambda_bodies):
        out = []
        lo = lo_
        k = lo_
        while k < hi:
            t = tokens[k]
            if t.text in ("(", "[") and match[k] is not None and match[k] > k:
                k = match[k] + 1 if not self._has_lambda(k, match[k], body_of) else k + 1
                continue
            if t.text == "{" and match[k] is not None:
                if k in body_of:
                    k = body_of[k].body_end + 1
                    continue
                if not is_block_brace(tokens, match, k, lambda_bodies):
                    k = match[k] + 1
                    continue
                if lo < k:
                    out.append((lo, k))
                lo = k + 1
                k += 1
                continue
            if t.text in (";", "}"):
                if lo < k:
                    out.append((lo, k))
                lo = k + 1
            k += 1
        if lo < hi:
            out.append((lo, hi))
        return out

    @staticmethod
    def _has_lambda(lo, hi, body_of):
        return any(lo < b < hi for b in body_of)

    @staticmethod
    def enclosing_calls(tokens, match):
        """For each '(' of a call, the name called (`spawn`, `block_on`, `run`): opener -> name."""
        calls = {}
        for k, t in enumerate(tokens):
            if t.text == "(" and k > 0 and tokens[k - 1].kind == "id":
                calls[k] = tokens[k - 1].text
            elif t.text == "(" and k > 0 and tokens[k - 1].text == ">":
                # name<args>(...)
                j = template_open(tokens, k - 1)
                if j is not None and j > 0 and tokens[j - 1].kind == "id":
                    calls[k] = tokens[j - 1].text
        return calls

    def finished_within_statement(self, tokens, match, lam, enclosing, lambda_bodies):
        """Whether the task of a lambda called on the spot ends before its statement does: it is
        (inside) the operand of a co_await, or (inside) the arguments of a blocking runner."""
        runners = self.runners | {"block_on"}
        k = lam.start - 1
        while k >= 0:
            t = tokens[k]
            if t.text in (")", "]", "}") and match[k] is not None and match[k] < k:
                if t.text == "}" and is_block_brace(tokens, match, match[k], lambda_bodies) and \
                        match[k] not in lambda_bodies:
                    return False  # the statement before this one
                k = match[k] - 1
                continue
            if t.text == "{" and is_block_brace(tokens, match, k, lambda_bodies):
                return False
            if t.text == "(" and enclosing.get(k) in runners:
                return True
            if t.text == "(" and match[k] is not None and match[k] + 3 < len(tokens) and \
                    tokens[match[k] + 1].text == "." and tokens[match[k] + 2].text == "join" \
                    and tokens[match[k] + 3].text == "(":
                return True  # rt.spawn(...).join(): joined before the statement ends
            if t.text == ";":
                return False
            if t.text == "co_await":
                return True
            k -= 1
        return False


# ------------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------------


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if path.endswith(".md"):
        return markdown_code(text)
    return text


def markdown_code(text):
    """The C++ code blocks of a markdown page (```cpp, ```c++), every other line left empty so
    that line numbers stay the page's."""
    out, inside = [], False
    for line in text.split("\n"):
        fence = line.strip()
        if not inside and re.match(r"```+\s*(cpp|c\+\+|cxx|cc)\b", fence):
            inside = True
            out.append("")
        elif inside and fence.startswith("```"):
            inside = False
            out.append("")
        else:
            out.append(line if inside else "")
    return "\n".join(out)


def expand(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for name in sorted(names):
                    if name.endswith(CXX_EXTENSIONS) or name.endswith(".md"):
                        files.append(os.path.join(root, name))
        else:
            files.append(p)
    return files


def resolve_include(name, quoted, from_dir, include_dirs):
    candidates = ([from_dir] if quoted else []) + include_dirs
    for d in candidates:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return os.path.normpath(p)
    return None


class UsageError(Exception):
    pass


def usage_error(what):
    print(f"{TOOL}: error: {what} (see --help)", file=sys.stderr)
    return 2


def main(argv=None):
    class Parser(argparse.ArgumentParser):
        def error(self, message):  # one line, exit 2, as every galay tool
            raise UsageError(message)

    ap = Parser(prog=TOOL, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("paths", nargs="*", metavar="FILE|DIR")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                    help="read the headers included from DIR to learn aggregate types")
    ap.add_argument("--runner", action="append", default=[], metavar="NAME",
                    help="a function that runs a task to its end before returning "
                    "(block_on is one)")
    ap.add_argument("--condition-macro", action="append", default=[], metavar="NAME",
                    help="a macro whose argument is a condition (assert, EXPECT_*, ASSERT_* are)")
    ap.add_argument("--stamp", metavar="FILE", help="write FILE when nothing is found")
    ap.add_argument("--quiet", action="store_true", help="no summary line")

    try:
        args = ap.parse_args(argv)
    except UsageError as e:
        return usage_error(str(e))
    except SystemExit as e:  # --help
        return 0 if e.code == 0 else 2
    if not args.paths:
        return usage_error("FILE|DIR: no source given")
    for d in args.include_dirs:
        if not os.path.isdir(d):
            return usage_error(f"-I {d}: not a directory")
    for p in args.paths:
        if not os.path.exists(p):
            return usage_error(f"{p}: no such file or directory")
    files = expand(args.paths)
    include_dirs = [os.path.abspath(d) for d in args.include_dirs]

    # Types first, from every file and (with -I) the headers they include.
    types = {}
    parsed = {}
    seen = set()
    queue = [os.path.abspath(f) for f in files]
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            text = read(path)
        except OSError as e:
            if path in (os.path.abspath(f) for f in files):
                print(f"{TOOL}: error: {path}: {e.strerror}", file=sys.stderr)
                return 2
            continue
        tokens, includes, suppressed = tokenize(text)
        parsed[path] = (tokens, suppressed)
        learn_types(tokens, match_brackets(tokens), types)
        if include_dirs:
            for name, quoted in includes:
                found = resolve_include(name, quoted, os.path.dirname(path), include_dirs)
                if found and found not in seen:
                    queue.append(found)

    checker = Checker(args.runner, args.condition_macro)
    count = 0
    for f in files:
        tokens, suppressed = parsed[os.path.abspath(f)]
        for line, form, safe in sorted(set(checker.check(tokens, types, suppressed))):
            print(f"{f}:{line}: {form}: {safe}")
            count += 1
    if count:
        if not args.quiet:
            print(f"{TOOL}: {count} unsafe form{'s' if count != 1 else ''} in "
                  f"{len(files)} file{'s' if len(files) != 1 else ''} (g++ 12 miscompiles them)",
                  file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as s:
            s.write(f"{len(files)} files checked\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
