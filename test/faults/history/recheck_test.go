package history

import (
	"encoding/json"
	"os"
	"testing"
)

// TestRecheck runs the checker again on a history a fault run kept
// (test/faults writes $TMPDIR/concord-faults-<seed>.json):
//
//	CONCORD_FAULTS_HISTORY=/tmp/concord-faults-N.json go test -run TestRecheck -v ./test/faults/history/
//
// Without the variable there is nothing to check and it says so.
func TestRecheck(t *testing.T) {
	f := os.Getenv("CONCORD_FAULTS_HISTORY")
	if f == "" {
		t.Skip("CONCORD_FAULTS_HISTORY names no kept history: nothing to recheck (a tool, not a test of the code)")
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var in Input
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	r := Check(in)
	t.Logf("%s", r)
	if !r.OK() {
		t.Fail()
	}
}
