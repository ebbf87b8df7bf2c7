package client_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/chime-scheduler/chime/client"
	"github.com/chime-scheduler/chime/slots"
)

func TestOwnerAndTableVersion(t *testing.T) {
	fc, c := newHalves(t)
	ctx := t.Context()
	if v := c.TableVersion(); v != "" {
		t.Errorf("TableVersion before any load = %q, want empty", v)
	}
	low, high := idIn(0, half), idIn(half, slots.Count)
	// n2 follows the high half but owns nothing: the map has no address
	// for it, so that half has no follower to fail over to.
	for _, tc := range []struct {
		id, owner, follower string
	}{{low, fc.nodes[0].srv.URL, fc.nodes[1].srv.URL}, {high, fc.nodes[1].srv.URL, ""}} {
		o, f, err := c.Owner(ctx, tc.id)
		if err != nil {
			t.Fatalf("Owner(%s): %v", tc.id, err)
		}
		if o != tc.owner || f != tc.follower {
			t.Errorf("Owner(%s) = %q, %q; want %q, %q", tc.id, o, f, tc.owner, tc.follower)
		}
	}
	if v := c.TableVersion(); v != "1" {
		t.Errorf("TableVersion = %q, want 1", v)
	}
}

func TestOwnerWithoutMap(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.setMap("1", [2]int{0, -1})
	c, err := client.New([]string{fc.nodes[0].srv.URL}, fastRetry, client.WithOwnerRouting(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Owner(t.Context(), "a"); !errors.Is(err, client.ErrNoOwner) {
		t.Errorf("Owner without routing: %v, want ErrNoOwner", err)
	}
}

// TestRoutingOff: without owner routing every request goes to the seed,
// the slot map is never loaded, and a forwarded answer does not load it.
func TestRoutingOff(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setMap("1", [2]int{0, 1}, [2]int{1, 2})
	c := newTestClient(t, fc, 2, client.WithOwnerRouting(false))
	ctx := t.Context()
	low, high := idIn(0, half), idIn(half, slots.Count)
	for _, id := range []string{low, high} {
		if _, err := c.Create(ctx, client.Task{ID: id, CallbackURL: "http://x/"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if got := fc.nodes[i].taken(true); len(got) > 0 {
			t.Errorf("n%d got %q, want nothing", i, got)
		}
	}
	if got, want := fc.nodes[2].taken(true), []string{"POST /v1/tasks", "POST /v1/tasks"}; !slices.Equal(got, want) {
		t.Errorf("the seed got %q, want %q (and no slot map load)", got, want)
	}
	if v := c.TableVersion(); v != "" {
		t.Errorf("TableVersion = %q, want none loaded", v)
	}
}
