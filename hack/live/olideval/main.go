// Command olideval measures the live classifier's Go model
// (runtime/domain/live/classifier/linear) on the OLID v1.0 level A test set, held
// out from its training: precision and recall of "offensive" at a few
// thresholds.
//
//	go run ./hack/live/olideval DIR   # DIR holds testset-levela.tsv and labels-levela.csv
package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/domain/live/classifier/linear"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: olideval DIR")
	}
	dir := os.Args[1]
	tsv, err := os.ReadFile(filepath.Join(dir, "testset-levela.tsv"))
	if err != nil {
		log.Fatal(err)
	}
	var ids, texts []string
	for i, line := range strings.Split(strings.TrimSpace(string(tsv)), "\n") {
		if i == 0 {
			continue
		}
		id, text, _ := strings.Cut(line, "\t")
		ids, texts = append(ids, id), append(texts, text)
	}
	f, err := os.Open(filepath.Join(dir, "labels-levela.csv"))
	if err != nil {
		log.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		log.Fatal(err)
	}
	gold := map[string]bool{}
	for _, r := range rows {
		gold[r[0]] = r[1] == "OFF"
	}
	m, err := linear.Default()
	if err != nil {
		log.Fatal(err)
	}
	scores, _ := m.Score(context.Background(), texts)
	off := 0
	for _, id := range ids {
		if gold[id] {
			off++
		}
	}
	for _, th := range []float64{0.5, 0.8, 0.9} {
		var tp, fp, fn int
		for i, id := range ids {
			switch {
			case scores[i] >= th && gold[id]:
				tp++
			case scores[i] >= th:
				fp++
			case gold[id]:
				fn++
			}
		}
		fmt.Printf("OLID level A test (%d tweets, %d offensive), threshold %.1f: precision %.3f recall %.3f\n",
			len(ids), off, th, float64(tp)/float64(max(tp+fp, 1)), float64(tp)/float64(max(tp+fn, 1)))
	}
}
