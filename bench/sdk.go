package bench

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// The routes through the Go SDK (RouteSDK, RouteSDKFixed): the same tasks
// as the other routes, created with client.Client.Create over net/http
// instead of the harness's fasthttp client, so the SDK's routing is what
// is measured. The SDK's own retries (client.DefaultRetryPolicy) replace
// postCreate's 429/503 loop.

// sdkCreator creates single tasks through one client.Client.
type sdkCreator struct {
	c  *client.Client
	hc *http.Client
}

// newSDKCreator returns the SDK client of route against tg's nodes: seeded
// with every node and routing to owners (RouteSDK), or seeded with the
// first node alone with owner routing off (RouteSDKFixed), so that node
// forwards what it does not own. The token and the TLS roots are the ones
// the harness's own clients use. conns sizes the connection pool: its
// MaxIdleConnsPerHost is 2*conns (newHTTPClient), not the SDK's default
// of 64, so any --concurrency keeps its connections alive.
func newSDKCreator(tg *target, route string, conns int) (*sdkCreator, error) {
	seeds := make([]string, 0, len(tg.nodes))
	for _, m := range tg.nodes {
		seeds = append(seeds, m.api.base)
	}
	var opts []client.Option
	if route == RouteSDKFixed {
		seeds = seeds[:1]
		opts = append(opts, client.WithOwnerRouting(false))
	}
	first := tg.nodes[0].api
	if first.token != "" {
		opts = append(opts, client.WithToken(first.token))
	}
	hc := newHTTPClient(conns, 0) // the SDK bounds each attempt (client.DefaultTimeout)
	tr := hc.Transport.(*http.Transport)
	if first.hc != nil {
		tr.TLSClientConfig = first.hc.TLSConfig // nil: the system roots
	}
	hc.Transport = attemptCounter{tr}
	c, err := client.New(seeds, append(opts, client.WithHTTPClient(hc))...)
	if err != nil {
		return nil, err
	}
	return &sdkCreator{c: c, hc: hc}, nil
}

// close releases the idle connections.
func (s *sdkCreator) close() { s.hc.CloseIdleConnections() }

// send returns the createPlan.send that creates task i of tt, due delay
// after the node receives it, with one Create. A request answered with an
// API error (after the SDK's retries) counts as rejected; any other error
// (no node answered, ctx ended) ends the phase, as a transport failure
// does postCreate.
func (s *sdkCreator) send(tt taskTemplate, delay time.Duration, result func(i int, ok bool)) func(context.Context, []int) (createOutcome, error) {
	payload := append([]byte(nil), tt.payload...)
	return func(ctx context.Context, idx []int) (createOutcome, error) {
		var out createOutcome
		i := idx[0]
		att := new(attempts)
		_, err := s.c.Create(context.WithValue(ctx, attemptsKey{}, att), client.Task{
			ID: tt.prefix + strconv.Itoa(i), CallbackURL: tt.url, Delay: delay, Payload: payload,
		})
		out.tries = max(att.n-1, 0) // sent again by the SDK, whatever the reason (429, 503, a node down)
		var ae *client.Error
		switch {
		case err == nil:
			out.ok = 1
		case errors.Is(err, client.ErrConflict) && att.n > 1:
			// The id exists and the SDK had sent the create before: an
			// earlier attempt stored it (its answer was a 503 or lost).
			// The attempts are counted (attemptCounter), so this is known,
			// not guessed; a 409 on the first attempt is a rejection.
			out.ok, out.existed = 1, 1
		case errors.As(err, &ae):
			out.bad, out.msg = 1, err.Error()
		default:
			return out, err
		}
		if result != nil {
			result(i, out.ok == 1)
		}
		return out, nil
	}
}

// attempts counts the POSTs one Create sent: the SDK retries inside
// Create, so the harness learns of its retries from the transport.
type attempts struct{ n int }

type attemptsKey struct{}

// attemptCounter counts each POST in the *attempts of its request's
// context (the SDK passes the caller's context down to every attempt).
// The SDK's slot map loads are GETs and not counted. Create sends its
// attempts one after another from the caller's goroutine, so the count
// needs no lock.
type attemptCounter struct{ next *http.Transport }

func (t attemptCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if a, ok := r.Context().Value(attemptsKey{}).(*attempts); ok && r.Method == http.MethodPost {
		a.n++
	}
	return t.next.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (t attemptCounter) CloseIdleConnections() { t.next.CloseIdleConnections() }
