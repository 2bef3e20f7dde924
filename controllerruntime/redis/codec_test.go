package crredis_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	crredis "github.com/go-workqueue/workqueue/controllerruntime/redis"
)

func TestRequestCodec(t *testing.T) {
	tests := []struct {
		req     reconcile.Request
		key     string
		wantErr bool
	}{
		{req: req("shop", "web"), key: "shop/web"},
		{req: req("", "node-1"), key: "/node-1"},
		{req: req("", ""), key: "/"},
		{req: req("a/b", "c"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.req.String(), func(t *testing.T) {
			key, err := crredis.RequestCodec{}.Encode(tt.req)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.key, key)
			got, err := crredis.RequestCodec{}.Decode(key)
			require.NoError(t, err)
			assert.Equal(t, tt.req, got)
		})
	}
	_, err := crredis.RequestCodec{}.Decode("no-slash")
	assert.Error(t, err, "a key without '/'")
}
