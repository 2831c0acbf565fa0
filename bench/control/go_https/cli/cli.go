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
