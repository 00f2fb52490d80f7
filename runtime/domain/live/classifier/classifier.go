// Package classifier holds the adapters of the live path's classifier
// port (live.Classifier): linear, a CPU model in Go (the offensive
// language model of alt-profanity-check, exported), and kserve, a
// client of an external inference server speaking the KServe v2 / Triton
// HTTP protocol.
package classifier
