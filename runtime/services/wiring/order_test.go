package wiring

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
)

func namesOf(rs []Role) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// The build order follows from the ports: a role comes after the roles
// giving what it needs or uses, whatever the table's order; the table's
// order breaks ties.
func TestOrderFollowsPorts(t *testing.T) {
	table := []Role{
		{Name: "gateway", Needs: []string{"guilds"}, Uses: []string{"presence"}},
		{Name: "presence", Uses: []string{"guilds"}, Gives: []string{"presence"}},
		{Name: "voice"},
		{Name: "guild", Needs: []string{"sink"}, Gives: []string{"guilds"}},
	}
	got, err := Order(table, []string{"sink"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"voice", "guild", "presence", "gateway"}; !slices.Equal(namesOf(got), want) {
		t.Fatalf("order %v, want %v", namesOf(got), want)
	}
	// A port a role uses but nothing gives does not hold it back.
	got, err = Order(table[:1:1], []string{"guilds"})
	if err != nil || len(got) != 1 {
		t.Fatalf("gateway alone with guilds given: %v %v", namesOf(got), err)
	}
}

// A role needing a port that neither the process nor any role gives
// stops the process at start with the port named; so does a cycle.
func TestOrderNamesTheMissingPort(t *testing.T) {
	table := []Role{
		{Name: "guild", Needs: []string{"guild/sink"}, Gives: []string{"guilds"}},
		{Name: "gateway", Needs: []string{"guilds"}},
	}
	_, err := Order(table, nil)
	if err == nil || !strings.Contains(err.Error(), `role guild needs port "guild/sink"`) {
		t.Fatalf("Order without the sink = %v, want the role and the port named", err)
	}
	_, err = Order(table[1:], nil)
	if err == nil || !strings.Contains(err.Error(), `role gateway needs port "guilds"`) {
		t.Fatalf("Order without the guild role = %v, want the port named", err)
	}
	cycle := []Role{
		{Name: "a", Needs: []string{"b"}, Gives: []string{"a"}},
		{Name: "b", Needs: []string{"a"}, Gives: []string{"b"}},
	}
	if _, err := Order(cycle, nil); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("Order of a cycle = %v, want a cycle named", err)
	}
}

// Build checks the order before building anything: the ports the seams
// hold already are the process's, and a missing one builds no role.
func TestBuildChecksPortsFirst(t *testing.T) {
	built := 0
	table := []Role{
		{Name: "one", Build: func(context.Context, *Builder) error { built++; return nil }},
		{Name: "two", Needs: []string{"guild/sink"}, Build: func(context.Context, *Builder) error { built++; return nil }},
	}
	var group lifecycle.Group
	var seams Seams
	err := Build(context.Background(), table, func(string) bool { return true }, Parts{Seams: &seams}, http.NewServeMux(), &group)
	if err == nil || !strings.Contains(err.Error(), `"guild/sink"`) || built != 0 {
		t.Fatalf("Build without the port = %v after building %d roles, want the port named and none built", err, built)
	}
	Provide(&seams, Key[int]{Name: "guild/sink"}, 1)
	if err := Build(context.Background(), table, func(string) bool { return true }, Parts{Seams: &seams}, http.NewServeMux(), &group); err != nil || built != 2 {
		t.Fatalf("Build with the port given = %v, built %d", err, built)
	}
}
