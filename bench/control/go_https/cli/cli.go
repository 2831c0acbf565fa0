// Package cli gives the Go peers the command-line convention of every program in bin/: --help
// (or -h) prints the usage on stdout and exits 0; a usage error is one line on stderr,
// "<tool>: error: <flag>: <problem> (see --help)", and exit 2.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Parse parses os.Args with the flags defined on flag.CommandLine. summary is the first line of
// the usage (what the program does).
func Parse(tool, summary string) {
	fs := flag.CommandLine
	fs.Init(tool, flag.ContinueOnError)
	var discard strings.Builder // the flag package's own messages: replaced by ours
	fs.SetOutput(&discard)
	err := fs.Parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Printf("%s\nUsage: %s [OPTIONS]\n\nOptions:\n", summary, tool)
		fs.PrintDefaults()
		fmt.Println("  --help\n    \tprint this help and exit")
		os.Exit(0)
	}
	if err != nil {
		Fail(tool, describe(err.Error()))
	}
	if fs.NArg() != 0 {
		Fail(tool, fmt.Sprintf("'%s': unexpected argument", fs.Arg(0)))
	}
	// Go reads an int flag with base prefixes ("0x10", "010", "0b1"): a number here is decimal
	// digits only, as in every other program of bin/.
	for name, text := range rawValues(os.Args[1:]) {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if _, isInt := f.Value.(flag.Getter).Get().(int); isInt && !decimal(text) {
			Fail(tool, fmt.Sprintf("--%s: '%s' is not a whole number", name, text))
		}
	}
}

// rawValues maps each flag given as -name=value, --name=value or -name value to its text.
func rawValues(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		name := strings.TrimLeft(a, "-")
		if n, v, ok := strings.Cut(name, "="); ok {
			out[n] = v
			continue
		}
		if f := flag.CommandLine.Lookup(name); f != nil {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
		}
		if i+1 < len(args) {
			out[name] = args[i+1]
			i++
		}
	}
	return out
}

// decimal: an optional '-' and decimal digits only, without a leading 0 (Go would read "010"
// as octal).
func decimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Fail reports a usage error in the one-line form and exits 2.
func Fail(tool, what string) {
	fmt.Fprintf(os.Stderr, "%s: error: %s (see --help)\n", tool, what)
	os.Exit(2)
}

// describe turns the flag package's messages into "<flag>: <problem>".
func describe(msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "--" + name + ": unknown option"
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "--" + name + ": needs a value"
	}
	// invalid value "X" for flag -NAME: PROBLEM
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			value, tail := rest[:i], rest[i+len(" for flag -"):]
			if name, problem, ok := strings.Cut(tail, ": "); ok {
				return "--" + name + ": " + value + " is not valid (" + problem + ")"
			}
		}
	}
	return msg
}
