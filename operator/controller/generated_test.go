package controller

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates deepcopy, CRDs, RBAC and the
// chart's copies into a temporary tree with hack/generate.sh and fails when
// any committed file differs or is missing: run hack/generate.sh and commit.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen; skipped with -short only")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "generate.sh"))
	cmd.Env = append(os.Environ(), "OUT_ROOT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/generate.sh: %v\n%s", err, b)
	}
	var checked int
	err = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s is missing: run hack/generate.sh", rel)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run hack/generate.sh", rel)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// No committed CRD without a type behind it.
	for _, dir := range []string{"config/crd/bases", "charts/concord/crds"} {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(out, dir, e.Name())); err != nil {
				t.Errorf("%s/%s is not generated from any type: delete it", dir, e.Name())
			}
		}
	}
	if checked < 13 {
		t.Fatalf("only %d generated files compared; expected deepcopy, 5 CRDs ×2, role and rules", checked)
	}
}
