package concord

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func utilyamlMarshal(o *unstructured.Unstructured) (string, error) {
	b, err := yaml.Marshal(o.Object)
	return string(b), err
}
