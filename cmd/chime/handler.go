package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/chime-scheduler/chime/node"
	"github.com/chime-scheduler/chime/node/dashboard"
	"github.com/chime-scheduler/chime/ui"
)

// httpHandler is what `chime serve` serves: the dashboard on /ui/ and
// /v1/ws, a redirect from / to /ui/, and the node's API everywhere else.
// Close stops the dashboard's websockets and waits for their goroutines.
type httpHandler struct {
	dash    *ui.Handler
	guarded http.Handler // dash behind the node's Host check
	api     http.Handler
}

// newHTTPHandler routes /ui/… and /v1/ws to the dashboard and everything
// else to n.Handler(). /v1/ws is matched before the node's handler, whose
// token check wants a header that browsers cannot send on a websocket; the
// dashboard checks the same tokens itself (query, subprotocol or header;
// the read token opens it too). Without a token, the dashboard answers
// only the Host names the API answers (node.GuardHost: DNS rebinding).
func newHTTPHandler(n *node.Node, token, readToken string, log *slog.Logger) *httpHandler {
	dash := ui.NewHandler(dashboardAPI{n.Dashboard()}, ui.Options{Token: token, ReadToken: readToken, Logger: log})
	return &httpHandler{dash: dash, guarded: n.GuardHost(dash), api: n.Handler()}
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/v1/ws" || p == "/ui" || strings.HasPrefix(p, "/ui/"):
		h.guarded.ServeHTTP(w, r)
	case p == "/":
		http.Redirect(w, r, "/ui/", http.StatusFound)
	default:
		h.api.ServeHTTP(w, r)
	}
}

// Close disconnects the dashboard's browsers and waits for its goroutines.
func (h *httpHandler) Close() error { return h.dash.Close() }

// dashboardAPI adapts a node's dashboard to ui.API.
type dashboardAPI struct{ d *dashboard.Dashboard }

func (a dashboardAPI) Snapshot(ctx context.Context) (any, error) {
	s, err := a.d.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}
