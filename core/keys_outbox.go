package core

func (k keyNames) Outbox(b int) string { return k.engine.settings.users[b].outbox }
