from handlers import run

from engine import Agent, Engine, Workflow

engine = Engine.connect("redis://127.0.0.1:6390/0")
wf = Workflow("word-count")
split = wf.task("split")
count = wf.task("count", after=[split], max_attempts=3)
wf.task("report", after=[count])
wid = engine.push(wf, input={"text": "a b a"})  # validated first: nothing written on error
Agent(engine, agent_id="first", handlers={"": run}).run(until_idle=True)
print(engine.status(wid).task("report").output)  # top words: [['a', 2], ['b', 1]]
