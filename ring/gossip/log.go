package gossip

import (
	"context"
	"log/slog"
	"strings"
)

// Log attribute keys (STYLE R26: constant keys).
const (
	logComponent = "component"
	logMember    = "member"
)

// slogWriter is the io.Writer behind the *log.Logger handed to memberlist:
// it turns each line memberlist prints into one slog record, with the level
// taken from memberlist's "[DEBUG]", "[INFO]", "[WARN]" or "[ERR]" prefix
// (lines without one are Info). log.Logger serializes calls to Write.
type slogWriter struct {
	log *slog.Logger
}

// Write implements io.Writer. It never fails.
func (w slogWriter) Write(p []byte) (int, error) {
	level, msg := memberlistLine(string(p))
	if w.log.Enabled(context.Background(), level) {
		w.log.Log(context.Background(), level, msg, logComponent, "memberlist")
	}
	return len(p), nil
}

// memberlistLine splits one memberlist log line into its level and message,
// dropping the level tag and the "memberlist: " prefix.
func memberlistLine(line string) (slog.Level, string) {
	line = strings.TrimRight(line, "\r\n")
	level := slog.LevelInfo
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if tag, msg, ok := strings.Cut(rest, "]"); ok {
			switch tag {
			case "DEBUG", "TRACE":
				level, line = slog.LevelDebug, msg
			case "INFO":
				level, line = slog.LevelInfo, msg
			case "WARN", "WARNING":
				level, line = slog.LevelWarn, msg
			case "ERR", "ERROR":
				level, line = slog.LevelError, msg
			}
		}
	}
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
