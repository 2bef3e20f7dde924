package inspect

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormatRate(t *testing.T) {
	tests := []struct {
		rate *float64
		want string
	}{
		{nil, "–"},
		{rate(0), "0"},
		{rate(6.0 / 3600), "0.0017"},
		{rate(0.5), "0.5"},
		{rate(2.25), "2.2"},
		{rate(99.94), "99.9"},
		{rate(99.96), "100"},
		{rate(1234.5), "1234"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatRate(tt.rate))
	}
}

func TestFormatSeconds(t *testing.T) {
	tests := []struct {
		seconds float64
		want    string
	}{
		{0, "0s"},
		{0.0004, "0s"},
		{0.25, "250ms"},
		{1.4, "1s"},
		{90, "1m30s"},
		{3601, "1h0m1s"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, formatSeconds(tt.seconds))
	}
}
