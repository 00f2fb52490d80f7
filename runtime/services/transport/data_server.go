package transport

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/dataservice"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// dataServer serves DataNode on a data node with a store.Messages (the
// node's coalescing dataservice.Service). Each handler checks the
// request, calls the backend and maps its error once.
type dataServer struct {
	transportpb.UnimplementedDataNodeServer
	backend store.Messages
	errs    errorTable
}

// eventBackend is the backend's event writer: a write that carries
// events is never committed without them. A backend that cannot commit
// events answers every such write with an error (503 to the sender).
func (s *dataServer) eventBackend() store.MessageEvents {
	if ew, ok := s.backend.(store.MessageEvents); ok {
		if c, ok := s.backend.(interface{ CommitsEvents() bool }); !ok || c.CommitsEvents() {
			return ew
		}
	}
	return noEvents{}
}

// noEvents refuses event writes.
type noEvents struct{}

func (noEvents) PutMessageEvents(context.Context, store.Message, ...store.Event) error {
	return dataservice.ErrNoEvents
}

func (noEvents) DeleteMessagesEvents(context.Context, snowflake.ID, []snowflake.ID, ...store.Event) error {
	return dataservice.ErrNoEvents
}

func checkChannel(ch uint64) (snowflake.ID, error) {
	if ch == 0 {
		return 0, fmt.Errorf("%w: zero channel id", ErrInvalid)
	}
	return snowflake.ID(ch), nil
}

// PutMessage implements DataNode.PutMessage.
func (s *dataServer) PutMessage(ctx context.Context, req *transportpb.PutMessageRequest) (*transportpb.PutMessageResponse, error) {
	if req.Message == nil || req.Message.ChannelId == 0 || req.Message.Id == 0 {
		return nil, s.errs.toStatus(fmt.Errorf("%w: message without id or channel", ErrInvalid))
	}
	evs, err := eventsFromPB(req.Events)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	m := messageFromPB(req.Message)
	if len(evs) > 0 {
		err = s.eventBackend().PutMessageEvents(ctx, m, evs...)
	} else {
		err = s.backend.PutMessage(ctx, m)
	}
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.PutMessageResponse{}, nil
}

// GetMessage implements DataNode.GetMessage.
func (s *dataServer) GetMessage(ctx context.Context, req *transportpb.GetMessageRequest) (*transportpb.GetMessageResponse, error) {
	ch, err := checkChannel(req.ChannelId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	m, err := s.backend.GetMessage(ctx, ch, snowflake.ID(req.MessageId))
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.GetMessageResponse{Message: messageToPB(m)}, nil
}

// DeleteMessage implements DataNode.DeleteMessage.
func (s *dataServer) DeleteMessage(ctx context.Context, req *transportpb.DeleteMessageRequest) (*transportpb.DeleteMessageResponse, error) {
	ch, err := checkChannel(req.ChannelId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if err := s.backend.DeleteMessage(ctx, ch, snowflake.ID(req.MessageId)); err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.DeleteMessageResponse{}, nil
}

// DeleteMessages implements DataNode.DeleteMessages.
func (s *dataServer) DeleteMessages(ctx context.Context, req *transportpb.DeleteMessagesRequest) (*transportpb.DeleteMessagesResponse, error) {
	ch, err := checkChannel(req.ChannelId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	evs, err := eventsFromPB(req.Events)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	if len(evs) > 0 {
		err = s.eventBackend().DeleteMessagesEvents(ctx, ch, idsFromPB(req.MessageIds), evs...)
	} else {
		err = s.backend.DeleteMessages(ctx, ch, idsFromPB(req.MessageIds))
	}
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.DeleteMessagesResponse{}, nil
}

// ListMessages implements DataNode.ListMessages.
func (s *dataServer) ListMessages(ctx context.Context, req *transportpb.ListMessagesRequest) (*transportpb.ListMessagesResponse, error) {
	ch, err := checkChannel(req.ChannelId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	q := store.HistoryQuery{Before: snowflake.ID(req.Before), After: snowflake.ID(req.After), Around: snowflake.ID(req.Around), Limit: int(req.Limit)}
	ms, err := s.backend.ListMessages(ctx, ch, q)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	out := make([]*transportpb.Message, len(ms))
	for i, m := range ms {
		out[i] = messageToPB(m)
	}
	return &transportpb.ListMessagesResponse{Messages: out}, nil
}

// Buckets implements DataNode.Buckets.
func (s *dataServer) Buckets(ctx context.Context, req *transportpb.BucketsRequest) (*transportpb.BucketsResponse, error) {
	ch, err := checkChannel(req.ChannelId)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	b, err := s.backend.Buckets(ctx, ch)
	if err != nil {
		return nil, s.errs.toStatus(err)
	}
	return &transportpb.BucketsResponse{Buckets: b}, nil
}
