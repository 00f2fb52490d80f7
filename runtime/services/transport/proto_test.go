package transport_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestGeneratedCodeIsFresh regenerates the protobuf code with
// hack/proto.sh into a temporary directory and fails when the committed
// files in transportpb differ from it. The first run builds buf and the
// plugins through `go run`, which takes a few minutes.
func TestGeneratedCodeIsFresh(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "buf.gen.yaml")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	tmp := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "proto.sh"), tmp)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/proto.sh: %v\n%s", err, out)
	}
	const pkg = "runtime/services/transport/transportpb"
	fresh := goFiles(t, filepath.Join(tmp, pkg))
	committed := goFiles(t, filepath.Join(root, pkg))
	if len(fresh) == 0 {
		t.Fatal("hack/proto.sh generated nothing")
	}
	for name, want := range fresh {
		got, ok := committed[name]
		if !ok {
			t.Errorf("%s/%s is not committed; run hack/proto.sh", pkg, name)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s is stale; run hack/proto.sh", pkg, name)
		}
	}
	for name := range committed {
		if _, ok := fresh[name]; !ok {
			t.Errorf("%s/%s is no longer generated; delete it", pkg, name)
		}
	}
}

// goFiles reads the .go files of dir, keyed by base name.
func goFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]byte)
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".go" || slices.Contains([]string{"doc.go"}, e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}
