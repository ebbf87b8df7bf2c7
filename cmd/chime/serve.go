package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/chime-scheduler/chime/node"
)

// shutdownGrace is how long running callbacks get to finish on SIGTERM.
const shutdownGrace = 10 * time.Second

// runServe runs `chime serve`: one node until ctx ends (SIGINT/SIGTERM),
// then a graceful stop: stop intake, let running fires finish up to 10 s,
// flush, close.
func runServe(ctx context.Context, args []string, _, stderr io.Writer, env func(string) string) error {
	cfg := node.DefaultConfig()
	fs := flag.NewFlagSet("chime serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http-addr", "127.0.0.1:7070", "address the HTTP API listens on")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the node's Pebble store")
	fs.StringVar(&cfg.Name, "name", "", "node name (default chime-<http port>)")
	fs.StringVar(&cfg.APIToken, "api-token", "", "require 'Authorization: Bearer <token>' on /v1/ and /metrics")
	fs.DurationVar(&cfg.Tick, "tick", cfg.Tick, "timing wheel resolution")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "how far ahead due tasks are loaded into memory")
	fs.DurationVar(&cfg.MisfireGrace, "misfire-grace", cfg.MisfireGrace, "how late a periodic fire may start before its misfire policy applies")
	fs.IntVar(&cfg.Limits.MaxPayloadBytes, "max-payload", cfg.Limits.MaxPayloadBytes, "largest task payload in bytes")
	fs.IntVar(&cfg.Dispatch.Concurrency, "concurrency", cfg.Dispatch.Concurrency, "callbacks in flight overall")
	fs.IntVar(&cfg.Dispatch.PerHost, "per-host", cfg.Dispatch.PerHost, "callbacks in flight per callback host")
	fs.IntVar(&cfg.Dispatch.MaxQueued, "dispatch-queue", cfg.Dispatch.MaxQueued, "callbacks waiting for a worker before creates get 429")
	fs.IntVar(&cfg.WriteQueue, "write-queue", cfg.WriteQueue, "API writes waiting for the writer before 429")
	fs.IntVar(&cfg.HistoryLimit, "history", cfg.HistoryLimit, "execution records kept per task")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	debugAddr := fs.String("debug-addr", "", "serve Go's pprof handlers on this address (e.g. 127.0.0.1:6060); off when empty")
	if err := parseWithEnv(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("serve: --log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fmt.Errorf("serve: listen: %w", err)
	}
	cfg.HTTPAddr = ln.Addr().String()
	if cfg.Name == "" {
		_, port, _ := net.SplitHostPort(cfg.HTTPAddr)
		cfg.Name = "chime-" + port
	}
	cfg.Logger = log
	n, err := node.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	if err := n.Start(); err != nil {
		ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	handler := newHTTPHandler(n, cfg.APIToken, log)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if *debugAddr != "" {
		stopDebug, err := serveDebug(*debugAddr, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("chime serving", "http", "http://"+cfg.HTTPAddr, "data_dir", cfg.DataDir, "version", version)

	select {
	case <-ctx.Done():
		log.Info("shutting down: stopping intake, letting running callbacks finish", "grace", shutdownGrace)
	case err = <-serveErr:
		log.Error("http server failed", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if e := srv.Shutdown(sctx); e != nil && !errors.Is(e, context.DeadlineExceeded) {
		log.Warn("http shutdown", "err", e)
	}
	_ = handler.Close() // the dashboard's websockets: Shutdown does not close them
	if e := n.Close(sctx); e != nil {
		return fmt.Errorf("serve: close: %w", e)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// parseWithEnv parses args after applying CHIME_<FLAG_NAME> variables as
// defaults (--data-dir <- CHIME_DATA_DIR); flags on the command line win.
func parseWithEnv(fs *flag.FlagSet, args []string, env func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := "CHIME_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fs.Parse(args)
}

// serveDebug serves net/http/pprof on addr until the returned func is called.
func serveDebug(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: --debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("debug server", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
