// Package kserve is the live classifier port's client of an external
// inference server that speaks the KServe v2 (Open Inference) protocol
// over HTTP, as Triton, KServe and Seldon MLServer do:
//
//	POST {base}/v2/models/{model}/infer
//	{"inputs":[{"name":"text","shape":[n],"datatype":"BYTES","data":["...", ...]}]}
//	-> {"outputs":[{"name":"score","shape":[n],"datatype":"FP32","data":[0.1, ...]}]}
//
// and GET {base}/v2/models/{model}/ready for readiness. The input and
// output tensor names are configurable: a model's own config names them.
package kserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Config names the server and the model.
type Config struct {
	// URL is the server's base URL (http://host:8000).
	URL string
	// Model is the model's name (and Version, when set, its version).
	Model, Version string
	// Input and Output are the tensor names (default "text" and "score").
	Input, Output string
	// Timeout bounds one request (default 5 s).
	Timeout time.Duration
	// Client is the HTTP client (default one of its own).
	Client *http.Client
}

// Client is a live.Classifier backed by the server.
type Client struct {
	cfg   Config
	infer string
	ready string
}

// New returns a client; it does not contact the server.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" || cfg.Model == "" {
		return nil, errors.New("kserve: URL and Model are required")
	}
	if cfg.Input == "" {
		cfg.Input = "text"
	}
	if cfg.Output == "" {
		cfg.Output = "score"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	base := cfg.URL + "/v2/models/" + url.PathEscape(cfg.Model)
	if cfg.Version != "" {
		base += "/versions/" + url.PathEscape(cfg.Version)
	}
	return &Client{cfg: cfg, infer: base + "/infer", ready: base + "/ready"}, nil
}

// Tensor is one named tensor of the protocol.
type Tensor struct {
	Name     string          `json:"name"`
	Shape    []int           `json:"shape"`
	Datatype string          `json:"datatype"`
	Data     json.RawMessage `json:"data"`
}

// Request is an inference request.
type Request struct {
	ID     string   `json:"id,omitempty"`
	Inputs []Tensor `json:"inputs"`
}

// Response is an inference response.
type Response struct {
	ModelName string   `json:"model_name"`
	ID        string   `json:"id,omitempty"`
	Outputs   []Tensor `json:"outputs"`
	Error     string   `json:"error,omitempty"`
}

// Score implements live.Classifier.
func (c *Client) Score(ctx context.Context, texts []string) ([]float64, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	data, _ := json.Marshal(texts)
	body, _ := json.Marshal(Request{Inputs: []Tensor{{Name: c.cfg.Input, Shape: []int{len(texts)}, Datatype: "BYTES", Data: data}}})
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.infer, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("kserve: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kserve: infer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("kserve: infer: %w", err)
	}
	var r Response
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kserve: infer: status %d: %.200s", resp.StatusCode, b)
	}
	for _, o := range r.Outputs {
		if o.Name != c.cfg.Output {
			continue
		}
		var scores []float64
		if err := json.Unmarshal(o.Data, &scores); err != nil {
			return nil, fmt.Errorf("kserve: output %s: %w", o.Name, err)
		}
		if len(scores) != len(texts) {
			return nil, fmt.Errorf("kserve: output %s has %d scores for %d texts", o.Name, len(scores), len(texts))
		}
		return scores, nil
	}
	return nil, fmt.Errorf("kserve: no output named %q", c.cfg.Output)
}

// Ready reports whether the server says the model is ready.
func (c *Client) Ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ready, nil)
	if err != nil {
		return fmt.Errorf("kserve: %w", err)
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("kserve: ready: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kserve: model %s not ready: status %d", c.cfg.Model, resp.StatusCode)
	}
	return nil
}
