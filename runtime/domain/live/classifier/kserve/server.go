package kserve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/concord-chat/concord/runtime/domain/live"
)

// Server serves a live.Classifier over the same protocol, as one model:
// GET /v2/health/ready, GET /v2/models/{model}/ready and
// POST /v2/models/{model}/infer (a BYTES input of texts, an FP32 output
// of scores). It lets the Go model run as its own inference service, and
// is what the client's tests run against.
type Server struct {
	Model      string
	Input      string // default "text"
	Output     string // default "score"
	Classifier live.Classifier
}

func (s *Server) names() (string, string) {
	in, out := s.Input, s.Output
	if in == "" {
		in = "text"
	}
	if out == "" {
		out = "score"
	}
	return in, out
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, r *http.Request) {})
	m.HandleFunc("GET /v2/models/{model}/ready", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("model") != s.Model {
			fail(w, http.StatusNotFound, fmt.Sprintf("model %q not found", r.PathValue("model")))
		}
	})
	m.HandleFunc("POST /v2/models/{model}/infer", s.infer)
	return m
}

func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (s *Server) infer(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("model") != s.Model {
		fail(w, http.StatusNotFound, fmt.Sprintf("model %q not found", r.PathValue("model")))
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var req Request
	if err := json.Unmarshal(b, &req); err != nil {
		fail(w, http.StatusBadRequest, "request: "+err.Error())
		return
	}
	in, out := s.names()
	var texts []string
	found := false
	for _, t := range req.Inputs {
		if t.Name != in {
			continue
		}
		found = true
		if t.Datatype != "BYTES" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("input %s: datatype %s, want BYTES", in, t.Datatype))
			return
		}
		if err := json.Unmarshal(t.Data, &texts); err != nil {
			fail(w, http.StatusBadRequest, fmt.Sprintf("input %s: %v", in, err))
			return
		}
		if len(t.Shape) != 1 || t.Shape[0] != len(texts) {
			fail(w, http.StatusBadRequest, fmt.Sprintf("input %s: shape %v for %d elements", in, t.Shape, len(texts)))
			return
		}
	}
	if !found {
		fail(w, http.StatusBadRequest, fmt.Sprintf("no input named %q", in))
		return
	}
	scores, err := s.Classifier.Score(r.Context(), texts)
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	f32 := make([]float32, len(scores))
	for i, v := range scores {
		f32[i] = float32(v)
	}
	data, _ := json.Marshal(f32)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(Response{ModelName: s.Model, ID: req.ID,
		Outputs: []Tensor{{Name: out, Shape: []int{len(scores)}, Datatype: "FP32", Data: data}}})
}
