package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chime-scheduler/chime/client"
)

func TestNodeCluster(t *testing.T) {
	c := newNodeClient(t)
	for _, ranges := range []bool{false, true} {
		raw, err := c.Cluster(t.Context(), ranges)
		if err != nil {
			t.Fatal(err)
		}
		var view struct {
			Self    string `json:"self"`
			Members []struct {
				Name        string      `json:"name"`
				SlotsOwned  int         `json:"slots_owned"`
				OwnedRanges [][2]uint16 `json:"owned_ranges"`
			} `json:"members"`
		}
		if err := json.Unmarshal(raw, &view); err != nil {
			t.Fatal(err)
		}
		if view.Self != "sdk-test" || len(view.Members) != 1 || view.Members[0].SlotsOwned != 16384 {
			t.Errorf("Cluster(ranges %v) = %s", ranges, raw)
		}
		if got, want := view.Members[0].OwnedRanges, map[bool][][2]uint16{true: {{0, 16383}}}[ranges]; !reflect.DeepEqual(got, want) {
			t.Errorf("Cluster(ranges %v): owned_ranges %v, want %v", ranges, got, want)
		}
	}
	if _, err := c.ForgetMember(t.Context(), "no-such-member"); !errors.As(err, new(*client.Error)) {
		t.Errorf("ForgetMember(no-such-member) = %v, want an error answer", err)
	}
}

func TestNodeDo(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	body := `{"id":"do:1","callback_url":"http://127.0.0.1:9/cb","every_ms":3600000}`
	status, answer, err := c.Do(ctx, http.MethodPut, "/v1/tasks/"+url.PathEscape("do:1"), nil, []byte(body))
	if err != nil || status != http.StatusCreated || !strings.Contains(string(answer), `"id":"do:1"`) {
		t.Fatalf("Do PUT = %d %s, %v", status, answer, err)
	}
	status, answer, err = c.Do(ctx, http.MethodGet, "/v1/tasks", url.Values{"limit": {"1000"}}, nil)
	if err != nil || status != http.StatusOK || !strings.Contains(string(answer), `"do:1"`) {
		t.Errorf("Do GET /v1/tasks = %d %s, %v", status, answer, err)
	}
	_, _, err = c.Do(ctx, http.MethodGet, "/v1/tasks/no-such-task", nil, nil)
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Do GET of a missing task = %v, want ErrNotFound", err)
	}
}

func TestNodeListPage(t *testing.T) {
	c := newNodeClient(t)
	ctx := t.Context()
	for _, id := range []string{"page-1", "page-2", "page-3"} {
		if _, _, err := c.Put(ctx, client.Task{ID: id, CallbackURL: "http://127.0.0.1:9/cb", Every: time.Hour,
			Labels: map[string]string{"list": "page"}}); err != nil {
			t.Fatal(err)
		}
	}
	f := client.ListFilter{LabelKey: "list", LabelValue: "page", PageSize: 2}
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		tasks, next, err := c.ListPage(ctx, f, cursor)
		if err != nil || pages > 3 {
			t.Fatalf("ListPage page %d = %v, %v", pages, tasks, err)
		}
		for _, task := range tasks {
			ids = append(ids, task.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(ids) != 3 {
		t.Errorf("ListPage pages listed %q, want the 3 tasks", ids)
	}
}

func TestBackupStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/v1/admin/backup":
			http.NotFound(w, r)
		case r.Header.Get("Authorization") != "Bearer tok":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":"unauthenticated","message":"bad token"}}`)
		default:
			_, _ = io.WriteString(w, "archive bytes")
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New([]string{srv.URL}, client.WithToken("tok"), client.WithTimeout(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	// WithTimeout does not bound the stream: a nanosecond would fail it.
	rc, err := c.Backup(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "archive bytes" {
		t.Errorf("Backup streamed %q, %v", b, err)
	}
	other, err := client.New([]string{"127.0.0.1:1"}, client.WithToken("wrong"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Backup(t.Context(), srv.URL)
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != "unauthenticated" || e.RetryAfter != 3*time.Second {
		t.Errorf("Backup with a wrong token = %#v, want the 401 answer with its Retry-After", err)
	}
}
