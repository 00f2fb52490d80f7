// Package linear is a CPU text classifier in Go: TF-IDF over word
// unigrams, then an average of sigmoid-calibrated linear models — the
// shape of the offensive-language model that the PyPI package
// alt-profanity-check ships, exported with its weights by
// hack/live/export_profanity_model.py into model.tsv.gz (provenance in
// its first lines). It reproduces that package's predict_prob to within
// rounding (golden.json, written by the same script, is the check).
package linear

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

//go:embed model.tsv.gz
var embedded []byte

// term is a vocabulary word's idf and its weight in each model.
type term struct {
	idf float64
	w   []float64
}

// calibrated is one linear model with its sigmoid calibration:
// p = 1 / (1 + exp(a*(w·x + intercept) + b)).
type calibrated struct {
	a, b, intercept float64
}

// Model is a loaded classifier. It is safe for concurrent use.
type Model struct {
	// Provenance is the model file's comment lines.
	Provenance []string
	cals       []calibrated
	vocab      map[string]term
}

var (
	defaultOnce  sync.Once
	defaultModel *Model
	defaultErr   error
)

// Default returns the embedded model (alt-profanity-check's), loaded once.
func Default() (*Model, error) {
	defaultOnce.Do(func() {
		defaultModel, defaultErr = Load(bytes.NewReader(embedded))
	})
	return defaultModel, defaultErr
}

// Load reads a gzipped model file.
func Load(r io.Reader) (*Model, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("linear: model: %w", err)
	}
	defer zr.Close()
	m := &Model{vocab: map[string]term{}}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if strings.HasPrefix(t, "#") {
			m.Provenance = append(m.Provenance, strings.TrimSpace(strings.TrimPrefix(t, "#")))
			continue
		}
		f := strings.Split(t, "\t")
		nums := make([]float64, len(f)-1)
		for i, s := range f[1:] {
			if nums[i], err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("linear: model line %d: %w", line, err)
			}
		}
		if f[0] == "cal" && len(nums) == 3 && len(m.vocab) == 0 {
			m.cals = append(m.cals, calibrated{a: nums[0], b: nums[1], intercept: nums[2]})
			continue
		}
		if len(nums) != 1+len(m.cals) || len(m.cals) == 0 {
			return nil, fmt.Errorf("linear: model line %d: %d numbers for %d models", line, len(nums), len(m.cals))
		}
		m.vocab[f[0]] = term{idf: nums[0], w: nums[1:]}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("linear: model: %w", err)
	}
	if len(m.vocab) == 0 {
		return nil, fmt.Errorf("linear: model: no vocabulary")
	}
	return m, nil
}

// Words returns the vocabulary size.
func (m *Model) Words() int { return len(m.vocab) }

// tokens splits text as scikit-learn's default token pattern does,
// (?u)\b\w\w+\b on the lower-cased text: runs of two or more letters,
// digits or underscores.
func tokens(text string, f func(string)) {
	text = strings.ToLower(text)
	start := -1
	for i, r := range text {
		word := r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			if s := text[start:i]; len([]rune(s)) >= 2 {
				f(s)
			}
			start = -1
		}
	}
	if start >= 0 {
		if s := text[start:]; len([]rune(s)) >= 2 {
			f(s)
		}
	}
}

// Score1 returns the probability that text is offensive.
func (m *Model) Score1(text string) float64 {
	counts := map[string]int{}
	tokens(text, func(w string) {
		if _, ok := m.vocab[w]; ok {
			counts[w]++
		}
	})
	var norm float64
	for w, n := range counts {
		x := float64(n) * m.vocab[w].idf
		norm += x * x
	}
	norm = math.Sqrt(norm)
	dots := make([]float64, len(m.cals))
	if norm > 0 {
		for w, n := range counts {
			t := m.vocab[w]
			x := float64(n) * t.idf / norm
			for i := range dots {
				dots[i] += x * t.w[i]
			}
		}
	}
	var p float64
	for i, c := range m.cals {
		p += 1 / (1 + math.Exp(c.a*(dots[i]+c.intercept)+c.b))
	}
	return p / float64(len(m.cals))
}

// Score implements live.Classifier: one probability per text.
func (m *Model) Score(ctx context.Context, texts []string) ([]float64, error) {
	out := make([]float64, len(texts))
	for i, t := range texts {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		out[i] = m.Score1(t)
	}
	return out, nil
}
