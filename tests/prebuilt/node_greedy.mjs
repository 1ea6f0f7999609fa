// node-llama-cpp (npm's prebuilt llama.cpp on ggml 0.25.1) runs the reference
// prompts of the bundled model greedily; prints one JSON line per prompt:
// {"prompt", "ids" (the generated token ids), "text" (LlamaCompletion's
// greedy completion)}. scripts/test-prebuilt.sh runs it with ggml's libraries
// and with loom's in their place.
//
//   node node_greedy.mjs MODEL N_PREDICT PROMPT...
import {getLlama, LlamaCompletion, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, nPredict, ...prompts] = process.argv.slice(2);
const n = Number(nPredict);
const llama = await getLlama({
    gpu: false,
    build: "never",
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.warn,
});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
for (const prompt of prompts) {
    // The token ids: BOS and the prompt, then greedy steps.
    let context = await model.createContext({contextSize: 512, threads: 2});
    const ids = [];
    const input = [model.tokens.bos, ...model.tokenize(prompt)];
    for await (const token of context.getSequence().evaluate(input, {temperature: 0})) {
        ids.push(token);
        if (ids.length >= n || model.isEogToken(token)) break;
    }
    await context.dispose();
    // The text, through the completion API.
    context = await model.createContext({contextSize: 512, threads: 2});
    const completion = new LlamaCompletion({contextSequence: context.getSequence()});
    const text = await completion.generateCompletion(prompt, {maxTokens: n, temperature: 0});
    await context.dispose();
    console.log(JSON.stringify({prompt, ids, text}));
}
await model.dispose();
await llama.dispose();
