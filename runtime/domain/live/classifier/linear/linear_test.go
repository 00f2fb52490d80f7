package linear

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// The Go port scores as alt-profanity-check's own predict_prob did when
// the model was exported (golden.json: the package's scores of those
// texts), to within the 7 significant digits the weights were written
// with.
func TestMatchesThePackage(t *testing.T) {
	m, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if m.Words() < 10_000 || len(m.Provenance) == 0 || !strings.Contains(m.Provenance[0], "alt-profanity-check") {
		t.Fatalf("model: %d words, provenance %q", m.Words(), m.Provenance)
	}
	b, err := os.ReadFile("golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct {
		Text  string  `json:"text"`
		Score float64 `json:"score"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(golden))
	for i, g := range golden {
		texts[i] = g.Text
	}
	got, err := m.Score(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	offensive := 0
	for i, g := range golden {
		if math.Abs(got[i]-g.Score) > 1e-5 {
			t.Errorf("%q: Go %.7f, package %.7f", g.Text, got[i], g.Score)
		}
		if g.Score > 0.5 {
			offensive++
		}
	}
	if offensive == 0 || offensive == len(golden) {
		t.Fatalf("the golden texts do not separate: %d of %d offensive", offensive, len(golden))
	}
}

func BenchmarkScore(b *testing.B) {
	m, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	texts := []string{"what a great stream, thanks!", "shut up you moron, nobody asked", "lol that was close"}
	for b.Loop() {
		m.Score(context.Background(), texts)
	}
}
