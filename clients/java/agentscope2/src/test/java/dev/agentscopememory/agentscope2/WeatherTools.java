package dev.agentscopememory.agentscope2;

import io.agentscope.core.tool.Tool;
import io.agentscope.core.tool.ToolParam;

/** Deterministic tools for the agent tests. */
public class WeatherTools {

    @Tool(name = "get_weather", description = "Current weather of a city")
    public String getWeather(@ToolParam(name = "city", description = "City name") String city) {
        return switch (city) {
            case "Paris" -> "Sunny, 21C";
            case "北京" -> "晴, 25C";
            default -> "Unknown city " + city;
        };
    }

    @Tool(name = "add", description = "Adds two integers")
    public int add(@ToolParam(name = "a", description = "first") int a,
            @ToolParam(name = "b", description = "second") int b) {
        return a + b;
    }
}
