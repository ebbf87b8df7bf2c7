package httpapi

import (
	"strings"
	"testing"
)

func TestValidateResultURLs(t *testing.T) {
	long := "http://x/" + strings.Repeat("a", maxURLLen)
	tests := []struct {
		name      string
		extra     string
		wantField string // "" = valid
		wantMsg   string
		success   string
		failure   string
	}{
		{"none", `"delay_ms":5`, "", "", "", ""},
		{"both", `"delay_ms":5,"success_url":"https://ok.example/s","failure_url":"http://ko.example:81/f"`, "", "", "https://ok.example/s", "http://ko.example:81/f"},
		{"empty is none", `"delay_ms":5,"success_url":""`, "", "", "", ""},
		{"null is none", `"delay_ms":5,"failure_url":null`, "", "", "", ""},
		{"success scheme", `"delay_ms":5,"success_url":"ftp://x/"`, "success_url", "http or https", "", ""},
		{"failure relative", `"delay_ms":5,"failure_url":"/f"`, "failure_url", "", "", ""},
		{"failure no host", `"delay_ms":5,"failure_url":"http:///f"`, "failure_url", "must name a host", "", ""},
		{"success too long", `"delay_ms":5,"success_url":"` + long + `"`, "success_url", "at most", "", ""},
		{"success not a string", `"delay_ms":5,"success_url":5`, "success_url", "", "", ""},
		{"given twice", `"delay_ms":5,"success_url":"http://a/","success_url":"http://b/"`, "success_url", "twice", "", ""},
		{"child's", `"delay_ms":5,"on_success":[` + child(`"failure_url":"gopher://x"`) + `]`, "on_success[0].failure_url", "http or https", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, spec, e := decodeValid(specBody(tt.extra), Limits{})
			if tt.wantField == "" {
				if e != nil {
					t.Fatalf("error %+v, want none", e)
				}
				if spec.SuccessURL != tt.success || spec.FailureURL != tt.failure {
					t.Fatalf("spec urls %q %q, want %q %q", spec.SuccessURL, spec.FailureURL, tt.success, tt.failure)
				}
				return
			}
			if e == nil {
				t.Fatalf("no error, want field %q (spec %+v)", tt.wantField, spec)
			}
			if e.Field != tt.wantField || !strings.Contains(e.Message, tt.wantMsg) {
				t.Fatalf("error field %q message %q, want field %q message with %q", e.Field, e.Message, tt.wantField, tt.wantMsg)
			}
		})
	}
}
