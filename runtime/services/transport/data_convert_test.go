package transport

import (
	"reflect"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestMessageConvertCarriesEveryField round-trips a message whose every
// field is set through the data nodes' wire form. A field of
// store.Message the conversion leaves out is lost on every message a
// guild node writes through a data node (--data-nodes=ring): the
// webhook's id once was, and with it every webhook-by-token route of the
// message answered 10008 in a cluster.
func TestMessageConvertCarriesEveryField(t *testing.T) {
	var m store.Message
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Interface().(type) {
		case snowflake.ID:
			f.SetUint(uint64(1000 + i))
		case string:
			f.SetString(name + " value")
		case int:
			f.SetInt(int64(10 + i))
		case bool:
			f.SetBool(true)
		case time.Time:
			f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
		case []snowflake.ID:
			f.Set(reflect.ValueOf([]snowflake.ID{snowflake.ID(2000 + i), snowflake.ID(3000 + i)}))
		case []store.Attachment:
			f.Set(reflect.ValueOf([]store.Attachment{{ID: 7, Filename: "a.png", Size: 3, URL: "k/a.png", ContentType: "image/png"}}))
		default:
			t.Fatalf("store.Message.%s has a type (%s) this test cannot fill: teach it, and the conversion", name, f.Type())
		}
	}
	got := messageFromPB(messageToPB(m))
	gv := reflect.ValueOf(got)
	for i := range v.NumField() {
		if !reflect.DeepEqual(gv.Field(i).Interface(), v.Field(i).Interface()) {
			t.Errorf("store.Message.%s = %v after the data node's wire form, want %v", v.Type().Field(i).Name, gv.Field(i).Interface(), v.Field(i).Interface())
		}
	}
}
