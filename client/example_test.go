package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/chime-scheduler/chime/client"
)

// The examples run against a real node (TestMain starts it at nodeAddr);
// in a program the seeds are some of the cluster's nodes, e.g.
// []string{"http://10.0.0.1:7070", "http://10.0.0.2:7070"}.

func Example() {
	ctx := context.Background()
	c, err := client.New([]string{nodeAddr})
	if err != nil {
		log.Fatal(err)
	}
	// A task that calls back once, an hour from now, with a payload.
	t, err := c.Create(ctx, client.Task{
		ID:          "example-invoice-42",
		CallbackURL: "https://example.com/hooks/invoice",
		Delay:       time.Hour,
		Payload:     json.RawMessage(`{"invoice":42}`),
		Labels:      map[string]string{"team": "billing"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, t.Status, t.Delay)

	// Creating it again is a conflict; errors.Is matches the sentinels.
	_, err = c.Create(ctx, client.Task{ID: "example-invoice-42", CallbackURL: "https://example.com/hooks/invoice"})
	fmt.Println(errors.Is(err, client.ErrConflict))

	if err := c.Delete(ctx, t.ID); err != nil {
		log.Fatal(err)
	}
	_, err = c.Get(ctx, t.ID)
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// example-invoice-42 scheduled 1h0m0s
	// true
	// true
}

func ExampleNew() {
	c, err := client.New([]string{nodeAddr, "127.0.0.1:1"}, // a second seed that is down
		client.WithTimeout(2*time.Second),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 3, BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}),
		client.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Get(context.Background(), "no-such-task")
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, errors.Is(err, client.ErrNotFound))
	}
	// Output: 404 not_found true
}

func ExampleClient_List() {
	ctx := context.Background()
	c, err := client.New([]string{nodeAddr})
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"example-list-a", "example-list-b", "example-list-c"} {
		_, err := c.Create(ctx, client.Task{ID: id, CallbackURL: "https://example.com/hook", Every: time.Minute,
			Labels: map[string]string{"example": "list"}})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Pages of 2: List follows the cursor.
	n := 0
	for t, err := range c.List(ctx, client.ListFilter{LabelKey: "example", LabelValue: "list", PageSize: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		n++
		_ = c.Delete(ctx, t.ID)
	}
	fmt.Println(n, "tasks")
	// Output: 3 tasks
}

func ExampleClient_CreateBatch() {
	ctx := context.Background()
	c, err := client.New([]string{nodeAddr})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.CreateBatch(ctx, []client.Task{
		{ID: "example-batch-1", CallbackURL: "https://example.com/hook", Delay: time.Hour},
		{ID: "example-batch-2", CallbackURL: "not a url", Delay: time.Hour},
		{ID: "example-batch-3", CallbackURL: "https://example.com/hook", Cron: "0 9 * * 1-5", Timezone: "Europe/Paris"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			fmt.Println(r.ID, r.Status, r.Err.Field)
			continue
		}
		fmt.Println(r.ID, r.Status)
		_ = c.Delete(ctx, r.ID)
	}
	// Output:
	// example-batch-1 201
	// example-batch-2 400 callback_url
	// example-batch-3 201
}

// A receiver: it checks the signature, parses the fire and acts on each
// fire once.
func ExampleVerifySignature() {
	dedupe := client.NewMemoryDeduper(100000)
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := client.VerifySignature(r, 5*time.Minute, signingKey); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		f, err := client.ParseFire(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := dedupe.Admit(f); err != nil {
			return // a repeat, or from a deposed owner: 200, nothing to do
		}
		got <- fmt.Sprintf("%s attempt %d: %s", f.FireID, f.Attempt, f.Payload)
	}))
	defer receiver.Close()

	c, err := client.New([]string{nodeAddr})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Create(context.Background(), client.Task{ID: "example-fire", CallbackURL: receiver.URL + "/hook",
		Payload: json.RawMessage(`{"hello":"world"}`)}) // no schedule: at once
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-got)
	// Output: example-fire:1 attempt 1: {"hello":"world"}
}
