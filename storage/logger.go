package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleLogger routes pebble's logger into slog so pebble never writes to
// stderr on its own. Infof carries routine events (flushes, WAL rotation)
// and goes to Debug; Errorf to Error; Fatalf logs and panics, because pebble
// calls it only for states it cannot continue from and expects it not to
// return (only main may exit the process).
type pebbleLogger struct {
	log *slog.Logger
}

var _ pebble.Logger = pebbleLogger{}

// Infof implements pebble.Logger.
func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(trimNL(fmt.Sprintf(format, args...)), "component", "pebble")
	}
}

// Errorf implements pebble.Logger.
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(trimNL(fmt.Sprintf(format, args...)), "component", "pebble")
}

// Fatalf implements pebble.Logger. It does not return: it panics with a
// fatalPanic, which the store's write paths turn into ErrFailed
// (Store.catch); anywhere else it ends the process.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := trimNL(fmt.Sprintf(format, args...))
	l.log.Error(msg, "component", "pebble", "fatal", true)
	panic(fatalPanic(msg))
}

// fatalPanic is what Fatalf panics with.
type fatalPanic string

func trimNL(s string) string { return strings.TrimRight(s, "\n") }
