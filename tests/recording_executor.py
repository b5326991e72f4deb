"""An executor written for the tests: it wraps the one a replay would use and records every call it is
sent (backend, node, mode, part) and every status it answers. It is the whole of what a new way to run
calls takes (irtrace/replay/execute.py): one class, handed to ReplayOptions(executor=...)."""
from irtrace.replay.execute import Wrapper


class Recording(Wrapper):
    def __init__(self, inner):
        super().__init__(inner)
        self.sent, self.answered = [], []
        Recording.last = self

    def send(self, backend, call):
        self.sent.append((backend, call.spec.name, call.mode, call.part))
        return super().send(backend, call)

    def receive(self, ticket):
        answer = super().receive(ticket)
        self.answered.append((ticket.backend, ticket.call.spec.name, ticket.call.mode, answer.status))
        return answer
