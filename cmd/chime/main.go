// Command chime runs a Chime node and talks to one.
//
//	chime serve [flags]          run a node (flags also from CHIME_* variables)
//	chime task <verb> [flags]    create, get, list, delete, pause, resume, trigger, retry, executions
//	chime flow <verb> [flags]    put, get, list, delete: a flow key's limits
//	chime cluster status         members, states and slots as one node sees them
//	chime cluster forget NAME    declare a dead member gone for good
//	chime cluster keys <op>      list, install, use, remove gossip keys (rotation)
//	chime bench <workload>       benchmark workloads (see docs/BENCHMARKS.md)
//	chime export / import        every task of a cluster as NDJSON, and back
//	chime backup / restore       Pebble checkpoints of every member, and a data dir from one
//	chime certs --dir D --name N a development CA and a node certificate
//	chime version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	_ "time/tzdata" // cron timezones work on machines without a zoneinfo database
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "chime:", err)
		}
		stop()
		os.Exit(1)
	}
}

const usage = `usage: chime <command> [flags]

commands:
  serve       run a node (chime serve -h for flags)
  task        manage tasks on a node: create|get|list|delete|pause|resume|trigger|retry|executions
  executions  the cluster's execution log, newest first: list (chime executions list -h)
  flow        a flow key's limits: put|get|list|delete (chime flow -h)
  stats       the fires due ahead, per node and hour: due (chime stats due -h)
  cluster     the cluster as one node sees it: status, forget, keys
  bench       run a benchmark workload
  export      write every task of the cluster as NDJSON to stdout (chime export -h)
  import      re-create exported tasks from NDJSON on stdin (chime import -h)
  backup      archive every member's store, online (chime backup -h)
  restore     make a data dir from one backup archive (chime restore -h)
  certs       make a development CA and a node certificate (chime certs -h)
  version     print the version
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr, env)
	case "task", "tasks":
		return runTask(ctx, args[1:], stdout, stderr, env)
	case "executions":
		return runExecutions(ctx, args[1:], stdout, stderr, env)
	case "flow", "flows":
		return runFlow(ctx, args[1:], stdout, stderr, env)
	case "stats":
		return runStats(ctx, args[1:], stdout, stderr, env)
	case "cluster":
		return runCluster(ctx, args[1:], stdout, stderr, env)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr, env)
	case "certs":
		return runCerts(ctx, args[1:], stdout, stderr, env)
	case "export":
		return runExport(ctx, args[1:], stdout, stderr, env)
	case "import":
		return runImport(ctx, args[1:], os.Stdin, stdout, stderr, env)
	case "backup":
		return runBackup(ctx, args[1:], stdout, stderr, env)
	case "restore":
		return runRestore(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "chime", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
